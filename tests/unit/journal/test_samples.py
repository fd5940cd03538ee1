"""The sample journals as one archive (servebook.journal.samples): packed deterministically, extracted once into the
cache whole or not at all, found by name; and the archive holds exactly the journals the docs and tests name."""

import os
import re
import tarfile
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servebook.cli import app
from servebook.journal import samples
from servebook.util.errors import InputError

ROOT = Path(__file__).resolve().parents[3]
#: a sample journal's name where a page or a test names it (not the archive, sample-journals.tar.xz, nor a glob)
NAMED = re.compile(r"\bsample-journal(?:-[a-z0-9]+)*\b(?![\w*.-])")


def journals(folder: Path, text: str = "x", *, reverse: bool = False) -> Path:
    """Two small sample journals under `folder`, their files created in the order asked."""
    files = ["sample-journal-a/runs/r1/manifest.json", "sample-journal-a/runs/r1/cells.parquet",
             "sample-journal-b/index.parquet", "sample-journal-b/runs/r2/manifest.json"]
    for name in reversed(files) if reverse else files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(f"{name} {text}")
    (folder / "not-a-journal").mkdir()
    return folder


def test_packing_an_unchanged_set_gives_the_same_bytes(tmp_path):
    one = journals(tmp_path / "one")
    two = journals(tmp_path / "two", reverse=True)
    os.utime(two / "sample-journal-a/runs/r1/manifest.json", (1, 1))
    (two / "sample-journal-b/index.parquet").chmod(0o600)
    assert samples.pack(one, tmp_path / "one.tar.xz") == ["sample-journal-a", "sample-journal-b"]
    samples.pack(two, tmp_path / "two.tar.xz")
    assert (tmp_path / "one.tar.xz").read_bytes() == (tmp_path / "two.tar.xz").read_bytes()
    (two / "sample-journal-b/index.parquet").write_text("changed")
    samples.pack(two, tmp_path / "two.tar.xz")
    assert (tmp_path / "one.tar.xz").read_bytes() != (tmp_path / "two.tar.xz").read_bytes()
    with tarfile.open(tmp_path / "one.tar.xz") as tar:
        names = tar.getnames()
    assert names == sorted(names) and not any(n.startswith("not-a-journal") for n in names)


def test_a_journal_is_extracted_once_into_the_cache_keyed_by_the_archives_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEBOOK_CACHE", str(tmp_path / "cache"))
    archive = tmp_path / "samples.tar.xz"
    samples.pack(journals(tmp_path / "src"), archive)
    path = samples.sample_journal("sample-journal-a", archive)
    assert (path / "runs/r1/manifest.json").read_text() == "sample-journal-a/runs/r1/manifest.json x"
    assert path.parent == tmp_path / "cache" / "sample-journals" / samples.archive_digest(archive)[:16]
    assert samples.sample_names(archive) == ["sample-journal-a", "sample-journal-b"]
    (path / "marker").write_text("")  # found again, not extracted again
    assert (samples.sample_journal("sample-journal-a", archive) / "marker").exists()
    samples.pack(journals(tmp_path / "changed", "y"), archive)  # another archive: another folder
    assert samples.sample_journal("sample-journal-a", archive).parent != path.parent


def test_a_second_extraction_that_loses_the_race_uses_the_first_and_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEBOOK_CACHE", str(tmp_path / "cache"))
    archive = tmp_path / "samples.tar.xz"
    samples.pack(journals(tmp_path / "src"), archive)
    root = samples.samples_root(archive)
    (root / "sample-journal-a" / "marker").write_text("")
    samples._extract(archive, root)  # another process's rename comes second: the folder already holds every file
    assert (root / "sample-journal-a" / "marker").exists()
    assert sorted(p.name for p in root.parent.iterdir()) == [root.name]


def test_processes_extracting_at_once_all_find_every_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEBOOK_CACHE", str(tmp_path / "cache"))
    archive = tmp_path / "samples.tar.xz"
    samples.pack(journals(tmp_path / "src"), archive)
    found: list[list[str]] = []

    def extract():
        root = samples.samples_root(archive)
        found.append(sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()))

    threads = [threading.Thread(target=extract) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(found) == 4 and all(files == found[0] for files in found) and len(found[0]) == 4
    assert len(list((tmp_path / "cache" / "sample-journals").iterdir())) == 1  # no staging folder left


def test_an_unknown_name_is_refused_with_the_names_there_are(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEBOOK_CACHE", str(tmp_path / "cache"))
    archive = tmp_path / "samples.tar.xz"
    samples.pack(journals(tmp_path / "src"), archive)
    for name in ("sample-journal-c", "../src", "not-a-journal"):
        with pytest.raises(InputError, match="the archive holds sample-journal-a, sample-journal-b"):
            samples.sample_journal(name, archive)
    with pytest.raises(InputError, match="no archive of sample journals"):
        samples.samples_root(tmp_path / "none.tar.xz")


def test_the_archive_holds_the_journals_the_docs_and_tests_name():
    shipped = set(samples.sample_names())
    index = set(NAMED.findall((ROOT / "docs" / "findings" / "README.md").read_text()))
    assert index == shipped, "docs/findings/README.md names each sample journal beside the finding it holds"
    named: dict[str, set[str]] = {}
    for folder, pattern in (("docs", "*.md"), ("tests", "*.py"), ("benchmarks", "*.py"), ("data/studies", "*.yaml"),
                            ("tools", "*"), (".", "*.md")):
        for path in (ROOT / folder).rglob(pattern) if folder != "." else (ROOT / folder).glob(pattern):
            if path.is_file() and path != Path(__file__):
                for name in NAMED.findall(path.read_text(errors="replace")):
                    named.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    unknown = {name: sorted(where) for name, where in named.items() if name not in shipped}
    assert not unknown, f"named but not in data/{samples.ARCHIVE}: {unknown}"


def test_the_shipped_archive_is_as_pack_writes_it():
    with tarfile.open(samples.archive_path()) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names) and {n.split("/")[0] for n in names} == set(samples.sample_names())
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(samples.MTIME, 0, 0, "", "")}
    assert {m.mode for m in members if m.isdir()} == {0o755} and {m.mode for m in members if m.isfile()} == {0o644}


def test_the_cli_extracts_them_where_asked_and_lists_runs_and_studies(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["journal", "samples", "sample-journal-vllm", "--out", str(tmp_path / "s")])
    assert result.exit_code == 0, result.output
    assert re.search(r"sample-journal-vllm +11 runs +h200-vllm-1b", result.output)
    assert (tmp_path / "s" / "sample-journal-vllm" / "runs").is_dir()
    again = runner.invoke(app, ["journal", "samples", "sample-journal-vllm", "--out", str(tmp_path / "s")])
    assert again.exit_code == 0 and "already there" in again.output
    wrong = runner.invoke(app, ["journal", "samples", "sample-journal-nope", "--out", str(tmp_path / "t")])
    assert wrong.exit_code == 2 and "no such sample journal" in wrong.output and not (tmp_path / "t").exists()
