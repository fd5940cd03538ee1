"""Files servebook writes get the mode any new file gets under the user's umask, not mkstemp's private 0600: a
published site and a shared journal must be readable by the web server or the colleague that reads them."""

import os
import stat

import pandas as pd

from servebook.journal import Journal, Manifest
from servebook.util.files import atomic_write_bytes


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_writes_and_every_journal_file_follow_the_umask(tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    atomic_write_bytes(tmp_path / "page.html", b"<html></html>")
    assert mode(tmp_path / "page.html") == 0o666 & ~umask  # 0644 under the usual umask of 022
    journal = Journal(tmp_path / "journal")
    writer = journal.start_run("c0ffee")
    writer.write_table("cells", pd.DataFrame([{"cell_id": "decode-prose-c1", "kind": "decode"}]))
    writer.write_json("server_info.json", {"version": "1"})
    writer.seal(Manifest(status="completed", candidate_id="c0ffee"))
    journal.index()
    written = [p for p in (tmp_path / "journal").rglob("*") if p.is_file()]
    assert written and all(mode(p) == 0o666 & ~umask for p in written), {str(p): oct(mode(p)) for p in written}


BUILD = """
import os, sys
from pathlib import Path
from servebook.journal import Journal
from servebook.journal.synthetic import write_synthetic_run
from servebook.present import build_site

root = Path(sys.argv[1])
journal = Journal(root / "journal")
for i in range(3):
    record = write_synthetic_run(journal, index=i, requests=20, label="baseline" if i == 0 else f"v{i}",
                                 verdict="accepted")
record.annotate("tag", "warm")
record.annotate("archive", "another job shared the host")
journal.index(write=True)
if len(sys.argv) > 2:  # a journal as a servebook that ignored the umask wrote it: every file its owner's alone
    for path in (root / "journal").rglob("*"):
        if path.is_file():
            path.chmod(0o600)
build_site(journal, root / "site")
"""


def _unreadable_by_others(root) -> dict[str, str]:
    """Files a web server running as another user could not read, and folders it could not enter."""
    wanted = lambda p: 0o005 if p.is_dir() else 0o004  # noqa: E731
    return {str(p.relative_to(root)): oct(mode(p)) for p in [root, *root.rglob("*")] if mode(p) & wanted(p) != wanted(p)}


def _build_under_umask_022(tmp_path, *args):
    import subprocess
    import sys

    subprocess.run(["sh", "-c", 'umask 022 && exec "$@"', "sh", sys.executable, "-c", BUILD, str(tmp_path), *args],
                   check=True, capture_output=True, timeout=300)


def test_a_journal_and_its_site_written_under_umask_022_are_readable_by_everyone(tmp_path):
    _build_under_umask_022(tmp_path)
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "journal" / "runs").is_dir()
    assert any((tmp_path / "journal" / "runs").rglob("annotations/*.json"))
    assert _unreadable_by_others(tmp_path / "journal") == {}
    assert _unreadable_by_others(tmp_path / "site") == {}


def test_a_site_built_from_a_private_journal_is_still_readable_by_the_web_server(tmp_path):
    # The site shares a sealed run's files with the journal by hard links where it can; a link would carry a 0600
    # journal file's mode onto the published site, so such a file is copied instead.
    _build_under_umask_022(tmp_path, "private")
    assert _unreadable_by_others(tmp_path / "site") == {}
    parquet = next((tmp_path / "site" / "runs").rglob("*.parquet"))
    assert mode(parquet) == 0o644
