"""`servebook journal import`: a second machine's journal brought into the first, run by run, whole and unchanged."""

import shutil
import tarfile

from typer.testing import CliRunner

from servebook.cli import app
from servebook.journal import Journal, samples
from servebook.journal.merge import import_runs
from servebook.util.paths import project_root

ROOT = project_root()


def test_a_second_machines_journal_is_imported_whole_once_from_a_folder_or_its_archive(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    shutil.copytree(samples.sample_journal("sample-journal-vllm-resident"), first)
    shutil.copytree(samples.sample_journal("sample-journal-vllm-h200b"), second)
    before = {r.run_id for r in Journal(first).runs()}
    (second / "runs" / "20991231T000000Z-cut-off").mkdir()  # a run the machine's end cut off: never sealed
    archive = tmp_path / "journal.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(second, arcname="sb-journal")  # as tools/gpu-host/gpu-host.sh pack writes it

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
    shutil.copytree(samples.sample_journal("sample-journal-vllm-replicas"), first)
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


def _source(tmp_path):
    """A second journal to import (the replicas sample) and its run ids."""
    second = tmp_path / "second"
    shutil.copytree(samples.sample_journal("sample-journal-vllm-replicas"), second)
    return second, sorted(p.name for p in (second / "runs").iterdir() if (p / "manifest.json").is_file())


def test_a_run_file_linking_outside_the_source_is_never_copied(tmp_path):
    """A link is never followed: the run holding one is refused with its reason, and the rest import."""
    second, runs = _source(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("PRIVATE-BYTES-FROM-OUTSIDE")
    linked = second / "runs" / runs[0] / "server_info.json"
    linked.unlink()
    linked.symlink_to(outside)
    (second / "runs" / runs[1] / "stray.txt").write_text("not a run's file")
    (second / "runs" / "20991231T000000Z-linked").symlink_to(tmp_path)  # a run folder that is a link
    first = Journal(tmp_path / "first")

    done = import_runs(first, second)
    assert runs[0] not in done.copied and set(done.copied) == set(runs[1:])
    assert any(r.startswith(f"{runs[0]}: server_info.json is a link") for r in done.refused), done.refused
    assert any(r.startswith("20991231T000000Z-linked: a link") for r in done.refused), done.refused
    assert done.left_out == [f"{runs[1]}/stray.txt"]
    landed = [p for p in first.root.rglob("*") if p.is_file()]
    assert not any(b"PRIVATE-BYTES-FROM-OUTSIDE" in p.read_bytes() for p in landed)
    assert not any(p.is_symlink() for p in first.root.rglob("*"))
    assert not list(first.runs_dir.glob(".import-*")), "nothing of a refused run stays behind"


def test_a_run_that_cannot_be_read_as_a_run_is_refused_with_its_reason_and_the_rest_import(tmp_path):
    second, runs = _source(tmp_path)
    (second / "runs" / runs[0]).rename(second / "runs" / "<img src=x onerror=alert(1)>")
    (second / "runs" / runs[1] / "manifest.json").write_text("{not json")
    cells = second / "runs" / runs[2] / "cells.parquet"
    cells.write_bytes(cells.read_bytes()[:100])  # a copy cut off
    first = tmp_path / "first"

    result = CliRunner().invoke(app, ["journal", "import", str(second), "--journal", str(first)])
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert "3 refused" in said and "<img src=x onerror=alert(1)>: not a run id" in said
    assert f"{runs[1]}: damaged (manifest_unreadable)" in said and f"{runs[2]}: damaged (table_unreadable)" in said
    assert {r.run_id for r in Journal(first).runs()} == set(runs[3:])
    listed = CliRunner().invoke(app, ["journal", "ls", "--journal", str(first)])
    assert listed.exit_code == 0, listed.output


def test_a_journal_holding_a_folder_that_is_no_run_id_still_lists(tmp_path):
    """A journal that took one in before imports were checked: the folder is not a run, and not a stop."""
    second, runs = _source(tmp_path)
    shutil.copytree(second / "runs" / runs[0], second / "runs" / "<img src=x>")
    assert "<img src=x>" not in Journal(second).run_ids()
    assert CliRunner().invoke(app, ["journal", "ls", "--journal", str(second)]).exit_code == 0


def test_a_truncated_archive_is_one_line_naming_the_file(tmp_path):
    second, _ = _source(tmp_path)
    archive = tmp_path / "journal.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(second, arcname="sb-journal")
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])  # cut off in transfer
    result = CliRunner().invoke(app, ["journal", "import", str(archive), "--journal", str(tmp_path / "first")])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert "Aborted" not in result.output and str(archive) in " ".join(result.output.split())
    assert "not a whole, readable archive" in " ".join(lines)
