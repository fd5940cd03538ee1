"""A disk that fills, without filling one: the writes a test picks go to /dev/full, whose every write the kernel
answers with ENOSPC as a full disk does (naming no file, as a failed write() names none)."""

import itertools
import os
from collections.abc import Callable

import pandas as pd

import servebook.util.files as files

FULL = "/dev/full"


def fill_disk(monkeypatch, full: Callable[[str], bool]) -> None:
    """From now on, every atomic write (util.files) and every parquet table whose path `full` picks finds the disk
    full; the others are written as ever."""
    temp_beside, to_parquet = files.temp_beside, pd.DataFrame.to_parquet

    def beside_a_full_disk(path, prefix=None):
        fd, tmp = temp_beside(path, prefix)
        if full(str(path)):
            device = os.open(FULL, os.O_WRONLY)
            os.dup2(device, fd)  # the temporary file stays (removed as a failed write removes it); its bytes go there
            os.close(device)
        return fd, tmp

    def parquet_on_a_full_disk(self, path, *args, **kwargs):
        return to_parquet(self, FULL if full(str(path)) else path, *args, **kwargs)

    monkeypatch.setattr(files, "temp_beside", beside_a_full_disk)
    monkeypatch.setattr(pd.DataFrame, "to_parquet", parquet_on_a_full_disk)


def writes_of(name: str, *, after: int = 0) -> Callable[[str], bool]:
    """Picks the writes of files named `name` (their temporary copies included) from the `after`+1-th on."""
    seen = itertools.count()
    return lambda path: name in os.path.basename(path) and next(seen) >= after
