"""Every table that shows a percentile marks one read from too few samples (measure.figures.tails): a run's decode table, its
ITL and probe tables, runs side by side and the study's figures over runs, text and HTML alike."""

import pandas as pd

from servebook.present.tables import estimate_tables, kind_tables, side_by_side
from servebook.present.under_load import itl_table, probe_table


def decode(label: str, gaps: int, requests: int = 40) -> dict:
    return {"cell_id": "decode-prose-c4", "kind": "decode", "category": "prose", "concurrency": 4, "valid": True,
            "reconciliation": "ok", "invalid_reasons": "", "aggregate_tok_s": 100.0, "per_request_tok_s": 25.0,
            "ttft_s": 0.05, "ttft_n": requests, "itl_p50_s": 0.01, "itl_p95_s": 0.02, "itl_p99_s": 0.03,
            "itl_max_s": 0.05, "itl_n": gaps, "label": label, "candidate": label}


def column(table, title: str) -> list[str]:
    return [row.values[table.columns.index(title)] for row in table.rows]


def test_a_runs_tables_mark_its_thin_tails_and_leave_the_rest():
    [run] = kind_tables([decode("a", gaps=40, requests=4)])
    assert column(run, "ITL p99") == ["30 ms insufficient (n=40)"]
    assert column(run, "TTFT") == ["50 ms insufficient (n=4)"]  # a median of 4 requests (11 needed)
    [enough] = kind_tables([decode("a", gaps=5000)])
    assert column(enough, "ITL p99") == ["30 ms"] and column(enough, "TTFT") == ["50 ms"]
    itl = itl_table([decode("a", gaps=100)])
    assert column(itl, "ITL p50") == ["10.0"] and column(itl, "p99")[0] == "30.0 insufficient (n=100)"
    assert column(itl, "p95")[0] == "20.0 insufficient (n=100)" and column(itl, "longest") == ["50.0"]
    probes = probe_table([{"cell_id": "prefill-8192", "kind": "prefill", "valid": True, "target_prompt_tokens": 8192,
                           "probe_requests": 12, "probe_ttft_p50_s": 0.1, "probe_ttft_p95_s": 0.3, "probe_ttft_n": 12,
                           "probe_itl_p50_s": 0.02, "probe_itl_p99_s": 0.2, "probe_itl_max_s": 0.4,
                           "probe_itl_n": 700}])
    assert column(probes, "TTFT p95") == ["300.0 insufficient (n=12)"] and column(probes, "ITL p99") == ["200.0"]


def test_runs_side_by_side_and_over_runs_mark_the_thinnest_tail():
    cells = pd.DataFrame([decode("a", gaps=40), decode("b", gaps=5000)])
    [itl] = [t for t in side_by_side(cells, ["a", "b"]) if "ITL p99" in t.title]
    assert itl.rows[0].values == ["decode-prose-c4", "30.0 insufficient (n=40)", "30.0"]
    runs = pd.DataFrame([decode("a", gaps=g) for g in (40, 900, 5000)])
    [table] = estimate_tables(runs)
    assert column(table, "ITL p99 ms")[0].endswith("insufficient (n=40)")
