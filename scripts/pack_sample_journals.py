"""Re-pack data/sample-journals.tar.xz from a folder of sample journals (its sample-journal* folders), for whoever
records a new one: extract them (`servebook journal samples`, into ./sample-journals), add the new journal's folder
beside them, then `make sample-journals` (this script). Packing is deterministic: an unchanged set gives the same
bytes, so git sees a change only where a journal changed.

    python scripts/pack_sample_journals.py [FOLDER] [--archive data/sample-journals.tar.xz]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from servebook.journal.samples import archive_path, pack


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default="sample-journals", help="where the sample-journal* folders are")
    parser.add_argument("--archive", type=Path, default=None, help="the archive to write (default: the checkout's)")
    args = parser.parse_args(argv)
    archive = args.archive or archive_path()
    before = archive.read_bytes() if archive.is_file() else None
    started = time.monotonic()
    names = pack(Path(args.folder), archive)
    state = "unchanged" if before == archive.read_bytes() else "written"
    print(f"{archive}: {len(names)} sample journals, {archive.stat().st_size / 2**20:.1f} MiB, {state} "
          f"({time.monotonic() - started:.0f} s): {', '.join(names)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
