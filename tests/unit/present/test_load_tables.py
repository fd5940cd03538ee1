"""Latency percentiles and capacity as a reader sees them: the run report, the site's pages and compare."""

import shutil

import pytest

from servebook.journal import Journal, samples
from servebook.journal.synthetic import write_capacity_run
from servebook.present import build_site, report
from servebook.present.load_tables import capacity_cells, capacity_estimates, capacity_text, latency_table
from servebook.present.site.pages import sections, summarize_run
from servebook.util.render import to_text

SAMPLE = samples.sample_journal("sample-journal")


@pytest.fixture
def capacity_journal(tmp_path):
    journal = Journal(tmp_path / "journal")
    first = write_capacity_run(journal, label="baseline", capacity_rps=8.0, low=7.0, high=9.5, index=1)
    second = write_capacity_run(journal, label="baseline", capacity_rps=9.0, low=8.0, high=10.0, index=2)
    second.append_verdict({"outcome": "accepted", "reasons": ["the baseline"], "study": "synthetic-capacity",
                           "run_ids": [first.run_id, second.run_id], "rules_hash": "synthetic", "rules": None,
                           "baseline_run_id": first.run_id})
    write_capacity_run(journal, label="one-slot", capacity_rps=3.0, low=2.5, high=3.5, index=3)
    return journal


def test_a_capacity_is_written_with_its_interval_and_objectives():
    cell = {"kind": "capacity", "capacity_rps": 11.8, "capacity_low_rps": 11.1, "capacity_high_rps": 12.4,
            "capacity_probes": 9, "slo_ttft_s": 2.0, "slo_tpot_s": None, "slo_e2e_s": None, "slo_target": 0.9}
    assert capacity_text(cell) == "holds 11.8 requests/s [11.1, 12.4] at TTFT <= 2 s for 90% of requests (9 probes)"


def test_capacity_over_two_runs_is_their_geometric_mean_with_their_range(capacity_journal):
    runs = {"baseline": [r for r in capacity_journal.runs() if r.candidate_label == "baseline"]}
    table = capacity_estimates(capacity_cells(runs))
    [row] = table.rows
    # sqrt(8 * 9) = 8.49; two runs give no t interval worth drawing (8.5 [2.15, 14.9] with one degree of freedom)
    assert row.values == ["baseline", "TTFT <= 1 s, TPOT <= 100 ms for 90% of requests", 2, "8.49 range [8, 9]",
                          "8, 9"]


def test_the_run_report_opens_with_the_capacity(capacity_journal):
    run = capacity_journal.runs()[0]
    text = to_text(report(run).blocks())
    assert "capacity: holds 8 requests/s [7, 9.5] at TTFT <= 1 s, TPOT <= 100 ms for 90% of requests" in text
    assert "Capacity under the objectives" in text and "Open-loop load against the objectives" in text


def test_site_index_study_and_planning_show_the_capacity(capacity_journal, tmp_path):
    build_site(capacity_journal, tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    assert "capacity requests/s (objectives)" in index
    assert "holds 3 requests/s [2.5, 3.5] at TTFT &lt;= 1 s, TPOT &lt;= 100 ms for 90% of requests" in index
    study = (tmp_path / "site" / "studies" / "synthetic-capacity.html").read_text()
    assert "Capacity under the objectives" in study and "8.49 range [8, 9]" in study
    # planning: the same figure per candidate as the capacity table, times the replicas (8 x 3)
    assert "8.49 requests/s at TTFT &lt;= 1 s" in study and "geometric mean of 2 runs" in study
    assert "3 requests/s at TTFT &lt;= 1 s" in study and "24 requests/s" in study


def test_an_old_journal_renders_its_latency_from_its_raw_tables(tmp_path):
    shutil.copytree(SAMPLE, tmp_path / "journal")
    journal = Journal(tmp_path / "journal")
    run = next(r for r in journal.runs() if r.status == "completed")
    assert "ttft_p99_ms" not in run.table("cells").columns  # recorded before the columns
    text = to_text(report(run).blocks())
    assert "Latency percentiles per cell" in text and "ITL (chunk gaps)" in text and "Total tok/s" in text
    summary = summarize_run(run)  # what the site's run page is drawn from
    [latency] = [s for s in sections([summary]) if s["title"] == "Latency percentiles and throughput"]
    first = latency["tables"][0].rows[0].values
    assert first[:2] == ["decode-prose-c1", "TTFT"] and first[4] == f"{summary.cells[0]['ttft_s'] * 1000:.1f}"
    # the samples behind it, counted from its requests
    assert first[2] == summary.cells[0]["requests"] - summary.cells[0]["errors"]
    assert sorted(p.name for p in (tmp_path / "journal").rglob("*")) == sorted(p.name for p in SAMPLE.rglob("*"))


def test_the_latency_table_has_a_row_per_figure_and_no_empty_ones():
    cells = [{"cell_id": "prefill-512", "kind": "prefill", "requests": 2, "valid": True, "ttft_mean_ms": 20.0,
              "ttft_p50_ms": 20.0, "ttft_p90_ms": 24.0, "ttft_p99_ms": 24.9, "e2e_p50_ms": 21.0,
              "tpot_p50_ms": None, "itl_p50_ms": None}]
    table = latency_table(cells)
    # a cell recorded without counts says so ("-" samples) and marks nothing it cannot judge
    assert [row.values for row in table.rows] == [["prefill-512", "TTFT", "-", "20.0", "20.0", "24.0", "24.9"],
                                                  ["", "end to end", "-", "-", "21.0", "-", "-"]]
