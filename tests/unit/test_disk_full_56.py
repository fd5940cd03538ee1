"""A full disk outside a run (issue 56, item 11): `site` into a full disk and `journal import` into a full journal are
one line naming the path, exit 2, and an import keeps nothing of the run it was copying; the index, the engine's
log and the seal's reserve meet a full disk without a traceback. The disk fills through /dev/full
(tests/helpers/disk.py) or, where the write is the test's to replace, an OSError with ENOSPC as the kernel gives it."""

import errno
import os
import tarfile
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

import servebook.journal.merge as merge
import servebook.util.files as files
from servebook.cli import app
from servebook.config.secrets import Scrubber
from servebook.journal import Journal
from servebook.journal.synthetic import write_synthetic_run
from servebook.journal.writer import RESERVE, RESERVE_BYTES
from servebook.launch.scrubbed_log import ScrubbedLog
from servebook.util.errors import DiskFull
from tests.helpers.disk import FULL, fill_disk, writes_of
from tests.helpers.journals import sealed_run


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def one_line(result, code=2):
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result.output


def journal_of(root: Path, runs: int) -> Journal:
    journal = Journal(root)
    for i in range(runs):
        write_synthetic_run(journal, index=i, requests=10)
    return journal


def test_a_site_into_a_full_disk_is_one_line_naming_the_file(tmp_path, monkeypatch):
    journal_of(tmp_path / "journal", 2)
    out = tmp_path / "site"
    fill_disk(monkeypatch, lambda path: path.startswith(str(out)))
    output = one_line(invoke("site", "--journal", tmp_path / "journal", "--out", out))
    assert f"error: {out}" in output and ": the disk is full (" in output and "bytes free)" in output


def test_an_import_into_a_full_journal_stops_in_one_line_and_keeps_nothing_of_the_run_it_copied(tmp_path,
                                                                                                 monkeypatch):
    source = journal_of(tmp_path / "source", 3)
    first, second, _ = sorted(p.name for p in source.runs_dir.iterdir())
    copy = merge._copy_regular

    def copy_onto_a_full_disk(path, target):
        if second not in str(target):
            return copy(path, target)
        target.parent.mkdir(exist_ok=True)
        target.touch()  # the file begun, as a copy cut short leaves it
        with open(FULL, "wb") as full:  # its bytes, which the disk has no room for
            full.write(path.read_bytes())

    monkeypatch.setattr(merge, "_copy_regular", copy_onto_a_full_disk)
    here = tmp_path / "here"
    output = one_line(invoke("journal", "import", source.root, "--journal", here))
    assert f"{here / 'runs'}: the disk is full (" in output
    assert f"journal import stopped at run {second}, of which nothing was kept; 1 runs copied before it" in output
    assert sorted(p.name for p in (here / "runs").iterdir()) == [first]  # no hidden .import-<id> folder left
    assert Journal(here).run(first).status == "completed"


def test_an_archive_unpacked_where_there_is_no_room_is_a_full_disk_not_a_damaged_archive(tmp_path, monkeypatch):
    source = journal_of(tmp_path / "source", 1)
    archive = tmp_path / "journal.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source.root, arcname="journal")

    def extract_onto_a_full_disk(self, path, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tarfile.TarFile, "extractall", extract_onto_a_full_disk)
    output = one_line(invoke("journal", "import", archive, "--journal", tmp_path / "here"))
    assert ": the disk is full (" in output and "set TMPDIR to a folder with room" in output
    assert "not a whole, readable archive" not in output


def test_the_index_of_a_sealed_run_is_left_for_later_when_the_disk_is_full(tmp_path, monkeypatch):
    journal = journal_of(tmp_path / "journal", 1)
    fill_disk(monkeypatch, writes_of("index"))
    assert list(journal.index(write=True)["status"]) == ["completed"]  # the run as sealed; the index derived later


def test_an_engine_log_on_a_full_disk_is_drained_without_a_traceback(monkeypatch):
    """The log's writer keeps reading the engine's output it has no room for: an engine whose pipe is not read
    blocks on its next line."""
    raised = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    read, write = os.pipe()
    log = ScrubbedLog(read, Path(FULL), Scrubber(("sk-secret-0123456789",)))
    log.start()
    os.write(write, b"loading the model\n" * 100)
    os.close(write)
    log.join()
    assert raised == [] and isinstance(log.lost_to, DiskFull)
    assert log.lost_to.filename == FULL and "the disk is full" in str(log.lost_to)


def test_a_run_holds_back_the_blocks_of_its_seal_and_gives_them_to_it(tmp_path):
    journal = Journal(tmp_path)
    writer = journal.start_run("abcdef123456")
    reserve = writer.dir / RESERVE
    assert reserve.stat().st_blocks * 512 >= RESERVE_BYTES  # allocated, not a sparse promise
    sealed_run(journal)  # another run: each holds its own
    from servebook.journal import Manifest

    writer.seal(Manifest(status="completed", candidate_id="abcdef123456"))
    assert not reserve.exists()


def test_a_journal_whose_disk_cannot_spare_the_reserve_starts_no_run(tmp_path, monkeypatch):
    def no_room(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "posix_fallocate", no_room)
    journal = Journal(tmp_path)
    with pytest.raises(DiskFull, match=r"runs: the disk is full \(.* bytes free\); no run started"):
        journal.start_run("abcdef123456")
    assert list(journal.runs_dir.iterdir()) == []
