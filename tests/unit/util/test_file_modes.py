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
