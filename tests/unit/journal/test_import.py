"""`servebook journal import`: a second machine's journal brought into the first, run by run, whole and unchanged."""

import shutil
import tarfile

from typer.testing import CliRunner

from servebook.cli import app
from servebook.journal import Journal
from servebook.journal.merge import import_runs
from servebook.util.paths import project_root

ROOT = project_root()


def test_a_second_machines_journal_is_imported_whole_once_from_a_folder_or_its_archive(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    shutil.copytree(ROOT / "data" / "sample-journal-vllm-resident", first)
    shutil.copytree(ROOT / "data" / "sample-journal-vllm-h200b", second)
    before = {r.run_id for r in Journal(first).runs()}
    (second / "runs" / "20991231T000000Z-cut-off").mkdir()  # a run the machine's end cut off: never sealed
    archive = tmp_path / "journal.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(second, arcname="sb-journal")  # as scripts/gpu-host.sh pack writes it

    done = import_runs(Journal(first), archive)
    assert len(done.copied) == 19 and done.unsealed == ["20991231T000000Z-cut-off"] and not done.conflicts
    merged = Journal(first)
    runs = merged.runs()
    assert {r.run_id for r in runs} == before | set(done.copied)
    assert len({r.manifest.environment.machine_key for r in runs if r.manifest}) == 2
    copied = merged.run(done.copied[0])
    assert copied.status == "completed" and copied.damage is None
    assert (copied.dir / "cells.parquet").read_bytes() == (second / "runs" / done.copied[0] / "cells.parquet").read_bytes()
    assert len(merged.index()) == len(runs)  # the index took them in

    again = import_runs(Journal(first), second)  # the folder itself, a second time: nothing changes
    assert not again.copied and len(again.already) == 19


def test_a_run_id_with_another_manifest_is_a_conflict_and_keeps_this_journals_run(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    shutil.copytree(ROOT / "data" / "sample-journal-vllm-replicas", first)
    shutil.copytree(first, second)
    run_id = sorted(p.name for p in (second / "runs").iterdir())[0]
    manifest = second / "runs" / run_id / "manifest.json"
    mine = (first / "runs" / run_id / "manifest.json").read_bytes()
    manifest.write_bytes(manifest.read_bytes().replace(b'"completed"', b'"failed"', 1))
    result = CliRunner().invoke(app, ["journal", "import", str(second), "--journal", str(first)])
    assert result.exit_code == 1
    said = " ".join(result.output.split())
    assert "1 with the same id and another manifest" in said and run_id in said
    assert (first / "runs" / run_id / "manifest.json").read_bytes() == mine
    missing = CliRunner().invoke(app, ["journal", "import", str(tmp_path / "nowhere"), "--journal", str(first)])
    assert missing.exit_code != 0 and "does not exist" in missing.output
