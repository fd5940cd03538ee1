"""Every command that only reads leaves the journal and the repository as it found them: each runs on a read-only
copy of a committed journal (chmod -R a-w), which must come out byte for byte the same, modes and file list
included (as root, a read-only mode stops no write, so the comparison is what catches one)."""

import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servebook.cli import app
from servebook.journal import samples

REPO = Path(__file__).resolve().parents[2]
STUDIES = REPO / "data" / "studies"


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    return {str(p.relative_to(root)): (stat.S_IMODE(p.lstat().st_mode), p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


def read_only_copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(stat.S_IMODE(path.lstat().st_mode) & ~0o222)
    return target


def writable_again(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        path.chmod(stat.S_IMODE(path.lstat().st_mode) | 0o200)


def repository_state() -> str | None:
    """What git sees changed in the repository (None where this is no git checkout)."""
    try:
        return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO, text=True,
                              capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


@pytest.fixture
def journals(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)  # a job's summary is outside the journal, not tested
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)  # a command that wrote ./journal or ./site would write here, and be seen
    roots = {"h200": read_only_copy(samples.sample_journal("sample-journal"), tmp_path / "h200"),
             "vllm": read_only_copy(samples.sample_journal("sample-journal-vllm"), tmp_path / "vllm")}
    yield roots
    for root in roots.values():
        writable_again(root)


#: (journal, arguments, exit status, words the output must hold): every read command, and the refusals among them
READS = [
    ("h200", ["journal", "ls"], 0, "47 runs"),
    ("h200", ["journal", "ls", "--where", "knobs.chunk_size>=512", "--sort", "aggregate_tok_s:desc", "--limit", "0"],
     0, "aggregate_tok_s"),
    ("h200", ["journal", "ls", "--where", "knobs.chunk=512"], 2, "knobs.chunk_size"),
    ("h200", ["journal", "ls", "--format", "json"], 0, "run_id"),
    ("h200", ["journal", "show", "005647Z"], 0, "20261201T005647Z-3b28606c"),
    ("h200", ["history", "baseline"], 2, "names 2 configurations"),
    ("h200", ["history", "baseline", "--study", "h200-1b-llamacpp"], 0, "study h200-1b-llamacpp"),
    ("h200", ["compare", "--a", "candidate=baseline,study=h200-1b-llamacpp", "--b", "candidate=ngram"], 0, "ngram"),
    ("h200", ["judge", STUDIES / "h200-1b-llamacpp.yaml"], 0, "chunk-8192"),
    ("h200", ["judge", STUDIES / "h200-1b-llamacpp.yaml", "--format", "markdown"], 0, "chunk-8192"),
    ("vllm", ["judge", STUDIES / "h200-vllm-1b.yaml", "--format", "json"], 0, "no-prefix-cache"),
    ("vllm", ["site", "--out", "SITE"], 0, "site: 11 runs"),
]
#: read commands other parts of servebook may add; each is run where the CLI has it
OPTIONAL = {"noise": ("h200", ["noise", STUDIES / "h200-1b-llamacpp.yaml"]),
            "report": ("h200", ["report", STUDIES / "h200-1b-llamacpp.yaml"])}


def _commands() -> set[str]:
    return {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}


def test_every_read_command_leaves_a_read_only_journal_and_the_repository_untouched(journals, tmp_path):
    before = {name: snapshot(root) for name, root in journals.items()}
    repository = repository_state()
    runner = CliRunner()
    reads = READS + [(*OPTIONAL[name], 0, "") for name in sorted(_commands() & set(OPTIONAL))]
    for journal, args, code, words in reads:
        argv = [str(tmp_path / "site") if a == "SITE" else str(a) for a in args] + ["--journal", str(journals[journal])]
        result = runner.invoke(app, argv)
        said = " ".join(result.output.split())
        assert result.exit_code == code, f"servebook {' '.join(argv)}: exit {result.exit_code}\n{result.output}"
        assert words in said, f"servebook {' '.join(argv)}: {words!r} not in\n{result.output}"
        for name, root in journals.items():
            assert snapshot(root) == before[name], f"servebook {' '.join(argv)} changed the {name} journal"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h200", "site", "vllm"]  # nothing written where it ran
    assert repository_state() == repository
    assert (tmp_path / "site" / "index.html").is_file()
