"""The commands as a CI log sees them (issue 34, items 7 and 10): stdout a pipe, no terminal, no $COLUMNS.

rich fell back to 80 columns there: run ids broke over two lines, `--wide` wrapped every cell, the noise table
and `sweep --help` were mangled. Each command here runs as a subprocess with its output captured (a pipe).
"""

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

import nbformat
import pytest

from servebook.journal import Journal, samples
from tests.helpers.cli import cli_env
from tests.helpers.cli import servebook as run_cli

REPO = Path(__file__).resolve().parents[2]
ENV = cli_env(columns=None)  # piped: no terminal width at all
servebook = partial(run_cli, env=ENV, no_traceback=True, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def journal(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("piped") / "journal"
    shutil.copytree(samples.sample_journal("sample-journal"), copy)
    return copy


@pytest.fixture(scope="module")
def run_ids(journal) -> list[str]:
    return Journal(journal).run_ids()


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_journal_ls_keeps_every_run_id_whole_on_one_line(journal, run_ids):
    listing = servebook("journal", "ls", "--limit", "0", "--journal", journal).stdout
    lines = listing.splitlines()
    assert all(sum(run_id[4:] in line for line in lines) == 1 for run_id in run_ids)
    assert len([line for line in lines if line.startswith("│")]) == len(run_ids), "one line per run"
    assert widest(listing) <= 120

    wide = servebook("journal", "ls", "--wide", "--limit", "0", "--journal", journal).stdout.splitlines()
    assert all(sum(run_id in line for line in wide) == 1 for run_id in run_ids)
    rows = [line for line in wide if line.startswith("│")]
    assert len(rows) == len(run_ids), "--wide wraps no cell"
    assert len({len(line) for line in rows}) == 1


def test_every_listing_format_reads_back(journal, run_ids):
    as_csv = servebook("journal", "ls", "--limit", "0", "--format", "csv", "--journal", journal).stdout
    assert [row["run_id"] for row in csv.DictReader(io.StringIO(as_csv))] == run_ids
    as_json = json.loads(servebook("journal", "ls", "--limit", "0", "--format", "json", "--journal", journal).stdout)
    assert [row["run_id"] for row in as_json] == run_ids
    plain = servebook("journal", "ls", "--limit", "0", "--format", "plain", "--journal", journal).stdout
    assert len(plain.splitlines()) == 2 + len(run_ids) and "│" not in plain

    history = servebook("history", "baseline", "--format", "plain", "--study", "data/studies/h200-1b-llamacpp.yaml",
                        "--journal", journal).stdout
    shown = [run_id for run_id in run_ids if run_id[4:] in history]
    assert len(shown) == 6 and all(sum(r[4:] in line for line in history.splitlines()) == 1 for r in shown)
    compared = servebook("compare", "--a", "candidate=baseline,study=h200-1b-llamacpp", "--b", "candidate=chunk-512,study=h200-1b-llamacpp", "--format", "csv",
                         "--journal", journal).stdout
    assert next(csv.reader(io.StringIO(compared)))[:2] == ["metric", "cell"]
    text = servebook("compare", "--a", "candidate=baseline,study=h200-1b-llamacpp", "--b", "candidate=chunk-512,study=h200-1b-llamacpp", "--journal", journal)
    assert widest(text.stdout) <= 120


def test_the_verdicts_and_noise_table_hold_120_columns(journal):
    judged = servebook("judge", "data/studies/h200-1b-llamacpp.yaml", "--journal", journal).stdout
    assert widest(judged) == 120
    noise = judged[judged.index("noise floor"):].splitlines()
    rows = [line for line in noise if line.startswith("│") and ("decode-prose-c" in line or "prefill-8192" in line)]
    assert len(rows) == 4 and all("…" not in line for line in noise)
    plain = servebook("judge", "data/studies/h200-1b-llamacpp.yaml", "--format", "plain", "--journal", journal)
    assert sum(line.startswith(("aggregate_tok_s", "prefill_tok_s")) for line in plain.stdout.splitlines()) == 4


def test_help_reads_at_120_columns_with_option_names_whole():
    shown = servebook("sweep", "--help").stdout
    assert widest(shown) <= 120 and "…" not in shown
    assert "--execution-timeout" in shown and "--no-retry-failed" in shown
    # a command's summary in the listing is one paragraph filling the width, not the docstring's line breaks
    lines = [line[1:-1].rstrip() for line in servebook("--help").stdout.splitlines() if line.startswith("│")]
    start = next(i for i, line in enumerate(lines) if line.startswith(" capacity "))
    end = next(i for i, line in enumerate(lines) if line.startswith(" sweep "))
    assert end - start >= 2 and all(len(line) >= 100 for line in lines[start:end - 1])


def test_version():
    from servebook import __version__

    assert servebook("--version").stdout == f"servebook {__version__}\n"


def test_a_site_out_that_cannot_be_written_is_one_line_and_exit_2(journal, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    for out in (a_file / "site", a_file):
        result = servebook("site", "--journal", journal, "--out", out, code=2)
        assert len(result.stderr.strip().splitlines()) == 1 and f"--out {out}" in result.stderr
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        assert "cannot write" in servebook("site", "--journal", journal, "--out", locked / "site", code=2).stderr


@pytest.mark.parametrize("args, said", [
    (["journal", "ls", "--study", "h200-1b-llamcpp"], "did you mean 'h200-1b-llamacpp'"),
    (["journal", "ls", "--status", "complete"], "did you mean 'completed'"),
    (["journal", "ls", "--candidate", "basline"], "did you mean 'baseline'"),
    (["journal", "ls", "--format", "jsn"], "did you mean 'json'"),
    (["history", "chunk512"], "did you mean 'chunk-512'"),
    (["compare", "--a", "candidate=baseline,study=h200-1b-llamacpp", "--b", "candidate=slots8"],
     "did you mean 'slots-8'"),
])
def test_a_misspelled_name_says_so_and_suggests_the_close_one(journal, args, said):
    result = servebook(*args, "--journal", journal, code=2)
    assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_papermill_run_ids_a_comma_b_reads_as_a_list(journal, run_ids, tmp_path):
    """`-p run_ids a,b` reached compare() as the string "a,b" and was read one character at a time."""
    index = Journal(journal).index()
    first = index[index["candidate"] == "baseline"]["run_id"].iloc[0]
    second = index[index["candidate"] == "ngram"]["run_id"].iloc[0]
    out = tmp_path / "compare.ipynb"
    subprocess.run([str(Path(sys.executable).parent / "papermill"), "notebooks/compare.ipynb", str(out),
                    "-p", "run_ids", f"{first},{second}", "-p", "journal", str(journal), "-k", "python3"],
                   cwd=REPO, env=ENV, check=True, capture_output=True, timeout=600)
    executed = nbformat.read(out, as_version=4)
    html = "".join(o.get("data", {}).get("text/html", "") for c in executed.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))
    assert "baseline" in html and "ngram" in html
