"""The site builder on synthetic journals: what is rendered, what is escaped, what is rebuilt."""

import pytest

from servebook.journal import Journal
from servebook.journal.synthetic import write_synthetic_run
from servebook.present import build_site

EVIL = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">'


@pytest.fixture
def journal(tmp_path):
    journal = Journal(tmp_path / "journal")
    write_synthetic_run(journal, index=1, label="baseline", verdict="accepted", requests=50)
    write_synthetic_run(journal, index=2, label="faster", verdict="accepted", requests=50)
    write_synthetic_run(journal, index=3, label="broken-counters", invalid="counters disagree: generated -3",
                        verdict="rejected", requests=50)
    write_synthetic_run(journal, index=4, label="refused", status="failed", verdict="failed", requests=50)
    write_synthetic_run(journal, index=5, label="killed", status="incomplete", requests=50)
    return journal


def test_every_status_is_rendered_and_marked(journal, tmp_path):
    report = build_site(journal, tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    for run in journal.runs():
        assert f"runs/{run.run_id}.html" in index
        assert (tmp_path / "site" / "runs" / f"{run.run_id}.html").is_file()
    assert "status-incomplete" in index and "status-failed" in index and "verdict-rejected" in index
    failed = next(r for r in journal.runs() if r.status == "failed")
    page = (tmp_path / "site" / "runs" / f"{failed.run_id}.html").read_text()
    assert "Failed during launch: bad_flag" in page and "invalid argument: --synthetic" in page
    incomplete = next(r for r in journal.runs() if r.status == "incomplete")
    assert "Incomplete: this run has no manifest" in (tmp_path / "site" / "runs" / f"{incomplete.run_id}.html").read_text()
    invalid = next(r for r in journal.runs() if r.candidate_label == "broken-counters")
    page = (tmp_path / "site" / "runs" / f"{invalid.run_id}.html").read_text()
    assert "INVALID: counters disagree: generated -3" in page and 'class="invalid"' in page
    study = (tmp_path / "site" / "studies" / "synthetic.html").read_text()
    assert "Arithmetic, not a measurement" in study and "<th>8 replicas</th>" in study and "(arithmetic)" in study
    assert "How these numbers are defined" in study
    assert report.runs == 5


def test_downloads_include_parquet_and_csv(journal, tmp_path):
    import pandas as pd

    build_site(journal, tmp_path / "site")
    run = next(r for r in journal.runs() if r.status == "completed")
    data = tmp_path / "site" / "runs" / run.run_id / "data"
    # every raw table as parquet, identical to the journal's, and as CSV (issue 19: one per table)
    pd.testing.assert_frame_equal(pd.read_parquet(data / "requests.parquet"), run.table("requests"))
    for table in run.dir.glob("*.parquet"):
        assert (data / table.name.replace(".parquet", ".csv")).is_file(), table.name
    assert len(pd.read_csv(data / "requests.csv")) == len(run.table("requests"))
    csv = (data / "cells.csv").read_text().splitlines()
    assert csv[0].startswith('"cell_id"') and len(csv) == len(run.table("cells")) + 1


def test_the_notebook_and_the_server_info_are_offered_and_the_notebook_shows_its_parameters(journal, tmp_path):
    import json

    import nbformat

    run = next(r for r in journal.runs() if r.status == "completed")
    (run.dir / "server_info.json").write_text(json.dumps({"version": "b1", "api_key": "sk-secret-value"}))
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell('journal = "journal"', metadata={"tags": ["parameters"]}),
                      nbformat.v4.new_code_cell('journal = "/data/qualify-journal"',
                                                metadata={"tags": ["injected-parameters"]})]
    journal.add_notebook(run.run_id, nbformat.writes(notebook).encode())
    build_site(journal, tmp_path / "site")
    page = (tmp_path / "site" / "runs" / f"{run.run_id}.html").read_text()
    assert "data/server_info.json" in page and "data/notebook.ipynb" in page
    data = tmp_path / "site" / "runs" / run.run_id / "data"
    assert "sk-secret-value" not in (data / "server_info.json").read_text()
    import html
    import re

    shown = html.unescape(re.sub(r"<[^>]+>", "", (tmp_path / "site" / "runs" / run.run_id / "notebook.html").read_text()))
    assert 'journal = "/data/qualify-journal"' in shown and 'journal = "journal"' not in shown


def test_journal_strings_are_escaped(tmp_path):
    journal = Journal(tmp_path / "journal")
    write_synthetic_run(journal, index=1, study="evil", label="baseline", requests=10)
    write_synthetic_run(journal, index=2, study="evil", label=f"x{EVIL}", verdict="rejected", reasons=[EVIL],
                        log_line=EVIL, requests=10)
    build_site(journal, tmp_path / "site")
    for page in (tmp_path / "site").rglob("*.html"):
        text = page.read_text()
        assert "<script>window.__pwned" not in text, page
        assert "<img src=x" not in text, page
    evil = next(r for r in journal.runs() if "x<script>" in r.candidate_label)
    data = (tmp_path / "site" / "runs" / evil.run_id / "compare.js").read_text()  # compare.html's data of the run
    assert "<script>" not in data and "\\u003cscript>" in data


def test_incremental_build_rewrites_only_what_changed(journal, tmp_path):
    out = tmp_path / "site"
    first = build_site(journal, out)
    assert first.written
    again = build_site(journal, out)
    assert again.written == []
    new = write_synthetic_run(journal, index=9, label="newcomer", verdict="accepted", requests=50)
    third = build_site(journal, out)
    written = set(third.written)
    assert f"runs/{new.run_id}.html" in written and "index.html" in written
    assert "studies/synthetic.html" in written and f"runs/{new.run_id}/compare.js" in written
    old_pages = {f"runs/{r.run_id}.html" for r in journal.runs() if r.run_id != new.run_id}
    assert not (written & old_pages), "pages of unchanged runs must not be rewritten"


def test_a_new_verdict_rebuilds_that_run(journal, tmp_path):
    out = tmp_path / "site"
    build_site(journal, out)
    run = next(r for r in journal.runs() if r.candidate_label == "faster")
    run.append_verdict({"outcome": "rejected", "reasons": ["re-judged under stricter rules"], "rules_hash": "x",
                        "rules": None, "baseline_run_id": None, "study": "synthetic"})
    report = build_site(journal, out)
    assert f"runs/{run.run_id}.html" in report.written
    assert "re-judged under stricter rules" in (out / "runs" / f"{run.run_id}.html").read_text()
    baseline = next(r for r in journal.runs() if r.candidate_label == "baseline")
    assert f"runs/{baseline.run_id}.html" not in report.written


def _site_files(out):
    skip = (".servebook-site.json", ".cache")
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and not str(p.relative_to(out)).startswith(skip)}


def test_an_incremental_build_after_one_new_run_is_byte_identical_to_a_full_build(journal, tmp_path):
    # A history long enough to have a step and an engine change, so the history page has all it can show.
    for i in range(10, 22):
        write_synthetic_run(journal, index=i, label="baseline", verdict="accepted", requests=20,
                            speed=1.0 if i < 16 else 0.8, started_at=f"2026-01-{i:02d}T00:00:00Z",
                            environment={"engine_version": "1.0" if i < 16 else "1.1"})
    out = tmp_path / "site"
    build_site(journal, out)
    assert "steps (PELT" in (out / "candidates" / "synthetic--baseline.html").read_text()  # a step was found
    new = write_synthetic_run(journal, index=22, label="baseline", verdict="accepted", requests=20, speed=0.8,
                              started_at="2026-01-22T00:00:00Z", environment={"engine_version": "1.1"})
    incremental = build_site(journal, out)
    assert {f"runs/{new.run_id}.html", "candidates/synthetic--baseline.html"} <= set(incremental.written)
    assert not {"candidates/synthetic--faster.html", "candidates/synthetic--broken-counters.html"} & set(incremental.written)
    assert not any(p.startswith("runs/") and new.run_id not in p for p in incremental.written)
    full = tmp_path / "full"
    build_site(journal, full)
    built, rebuilt = _site_files(out), _site_files(full)
    assert built.keys() == rebuilt.keys()
    assert [name for name in built if built[name] != rebuilt[name]] == []


def test_a_long_engine_log_is_published_as_its_start_and_end_and_the_journal_keeps_it_whole(journal, tmp_path):
    from servebook.present.site import downloads

    run = next(r for r in journal.runs() if r.status == "completed")
    lines = [f"0.00.{i:06d} I srv update: - cache state line {i}\n" for i in range(3 * downloads.LOG_LINES_EACH_END)]
    (run.dir / "engine.log").write_text("".join(lines))
    build_site(journal, tmp_path / "site")
    published = (tmp_path / "site" / "runs" / run.run_id / "data" / "engine.log").read_text().splitlines(keepends=True)
    each = downloads.LOG_LINES_EACH_END
    assert published[:each] == lines[:each] and published[-each:] == lines[-each:]
    assert f"{len(lines) - 2 * each:,} lines of the engine's log are left out" in published[each]
    assert len((run.dir / "engine.log").read_text().splitlines()) == len(lines)
    assert downloads.log_excerpt(b"short\nlog\n") == b"short\nlog\n"


def test_cells_left_out_in_a_legacy_verdict_are_one_count_with_their_runs_linked(tmp_path):
    """Issue 55, item 5: a verdict recorded before its left-out cells were typed named each in a reason of its own
    (the capacity page listed 16); the study and run pages fold them into one count, the study page linking each run."""
    journal = Journal(tmp_path / "journal")
    busy = "host busy: other processes used 0.45 CPU cores during the cell (limit 0.4)"
    lines = [f"left out: run {run} decode-prose-c{n} ({busy})" for run in ("r-1", "r-2") for n in (1, 2, 4)]
    record = write_synthetic_run(journal, index=1, label="baseline", verdict="accepted", requests=50,
                                 reasons=["baseline of the study", *lines])
    build_site(journal, tmp_path / "site")
    folded = "6 cells of 2 runs left out: host busy 6"
    study = (tmp_path / "site" / "studies" / "synthetic.html").read_text()
    run = (tmp_path / "site" / "runs" / f"{record.run_id}.html").read_text()
    for page in (study, run):
        assert "left out: run" not in page and page.count(folded) == 1
    assert '(runs <a href="../runs/r-1.html">r-1</a>, <a href="../runs/r-2.html">r-2</a>)' in study
