"""Tail sufficiency (issue 55): every percentile carries the samples behind it, and one read from fewer than its
confidence needs is insufficient, by one rule (measure.figures.tails) that reproduces the MLCommons figure of 662."""

import math

import pandas as pd
import pytest

from servebook.measure.cells import CellSpec, summarize_cell
from servebook.measure.figures.latency import COUNT_COLUMNS, LATENCY_COLUMNS
from servebook.measure.figures.latency_tables import with_latency
from servebook.measure.figures.tails import CONFIDENCE, percentile_of, samples_needed, sufficient, tail_of
from servebook.measure.observers.reconcile import Check, Reconciliation
from servebook.measure.transport.client import RequestRecord

OK = Reconciliation("ok", [Check("generated tokens", 10, 10)])


def test_the_rule_asks_662_samples_of_a_p99_at_99_percent_as_mlcommons_does():
    assert CONFIDENCE == 0.99
    assert samples_needed(0.99) == 662
    # worked by hand: at least two samples at or above the true p99 with 99% confidence
    at = {n: 1 - 0.99 ** n - n * 0.01 * 0.99 ** (n - 1) for n in (661, 662)}
    assert at[661] < 0.99 <= at[662]
    # the looser bound at the maximum alone would ask 459 (ln 0.01 / ln 0.99 = 458.2): not the rule
    assert math.ceil(math.log(0.01) / math.log(0.99)) == 459 < samples_needed(0.99)
    assert [samples_needed(p) for p in (0.5, 0.9, 0.95)] == [11, 64, 130]
    assert not sufficient(0.99, 40) and not sufficient(0.99, 661) and sufficient(0.99, 662) and sufficient(0.99, 700)


def test_each_percentile_column_names_the_count_behind_it():
    assert percentile_of("ttft_p99_ms") == (0.99, "ttft_n")
    assert percentile_of("itl_p90_ms") == (0.9, "itl_n")
    assert percentile_of("itl_p99_s") == (0.99, "itl_n")
    assert percentile_of("probe_ttft_p95_s") == (0.95, "probe_ttft_n")
    assert percentile_of("probe_itl_p99_s") == (0.99, "probe_itl_n")
    assert percentile_of("ttft_s") == (0.5, "ttft_n") and percentile_of("ttft_p90_s") == (0.9, "ttft_n")
    assert percentile_of("replay_ttft_p90_s") == (0.9, "replay_ttft_n")
    assert percentile_of("ttft_mean_ms") is None and percentile_of("aggregate_tok_s") is None
    assert percentile_of("itl_max_s") is None


def records(n: int, gaps_each: int = 0) -> list[RequestRecord]:
    out = []
    for i in range(n):
        first, step = 0.1 + 0.001 * (i % 17), 0.01
        times = [first + step * k for k in range(gaps_each + 1)] if gaps_each else []
        out.append(RequestRecord(f"r{i}", "c", 4, "prose", 8, t_send=0.0, t_first=first,
                                 t_last=first + step * max(gaps_each, 1), prompt_tokens=5,
                                 completion_tokens=max(gaps_each + 1, 2), chunk_times=times))
    return out


def test_a_cell_counts_the_samples_behind_each_latency():
    row = summarize_cell(CellSpec("c", "decode", "prose", 4, 40, 8), records(40, gaps_each=3), OK)
    assert (row["ttft_n"], row["tpot_n"], row["itl_n"], row["e2e_n"]) == (40, 40, 120, 40)
    assert LATENCY_COLUMNS[-4:] == COUNT_COLUMNS  # added after the columns recorded before them
    p99 = tail_of(dict(row), "ttft_p99_ms")
    assert p99 is not None and p99.insufficient and p99.words() == "insufficient (n=40)"
    assert "40 samples, fewer than the 662 a p99 needs at 99% confidence" == p99.reason()
    assert not tail_of(dict(row), "ttft_p50_ms").insufficient  # 40 >= 11


def test_a_run_sealed_before_counts_gets_them_from_its_requests_when_read():
    cells = pd.DataFrame([{"cell_id": "c", "kind": "decode", "wall_s": 2.0, "valid": True, "ttft_p99_ms": 1.0}])
    requests = pd.DataFrame([{"request_id": f"r{i}", "cell_id": "c", "t_send": 0.0, "t_first": 0.1, "t_last": 0.5,
                              "prompt_tokens": 5, "completion_tokens": 4, "error": None} for i in range(7)])
    found = with_latency(cells, requests, None)
    assert found.loc[0, "ttft_n"] == 7 and found.loc[0, "itl_n"] == 0
    assert found.loc[0, "ttft_p99_ms"] == 1.0  # what was stored is kept


@pytest.mark.parametrize(("n", "insufficient"), [(40, True), (700, False)])
def test_the_latency_table_prints_a_thin_p99_as_insufficient(n, insufficient):
    from servebook.present.load_tables import latency_table
    from servebook.util.render import to_html, to_plain, to_text

    row = summarize_cell(CellSpec("decode-prose-c4", "decode", "prose", 4, n, 8), records(n), OK)
    table = latency_table([dict(row)])
    ttft = next(r.values for r in table.rows if r.values[1] == "TTFT")
    columns = table.columns
    assert ttft[columns.index("n")] == n
    p99 = ttft[columns.index("p99")]
    assert ("insufficient (n=40)" in p99) is insufficient
    assert "insufficient" not in ttft[columns.index("p50")]
    # the plain text, the terminal's (which may wrap it within its column) and the site's HTML alike
    assert ("insufficient (n=40)" in to_plain([table])) is insufficient
    assert ("insufficient" in to_text([table])) is insufficient
    assert ("insufficient (n=40)" in to_html([table])) is insufficient
