"""The peers' latency percentiles and throughputs (measure.figures.latency), each against a small example worked by hand."""

import pandas as pd
import pytest

from servebook.measure.cells import CellSpec, summarize_cell
from servebook.measure.figures.latency import LATENCY_COLUMNS, figures, quantile
from servebook.measure.figures.latency_tables import with_latency
from servebook.measure.observers.reconcile import Check, Reconciliation
from servebook.measure.transport.client import RequestRecord

OK = Reconciliation("ok", [Check("generated tokens", 10, 10)])


def test_percentiles_interpolate_between_order_statistics_as_numpy_does():
    # ranks 0..3 of [1, 2, 3, 4]: p50 at rank 1.5 -> 2.5; p90 at 2.7 -> 3.7; p99 at 2.97 -> 3.97
    assert quantile([4.0, 1.0, 3.0, 2.0], 0.5) == pytest.approx(2.5)
    assert quantile([4.0, 1.0, 3.0, 2.0], 0.9) == pytest.approx(3.7)
    assert quantile([4.0, 1.0, 3.0, 2.0], 0.99) == pytest.approx(3.97)
    assert quantile([7.0], 0.99) == 7.0
    assert quantile([], 0.5) is None


def test_ttft_e2e_and_tpot_per_request():
    # request a: sent 0, first token 0.2, last 1.2, 11 tokens -> TTFT 200 ms, E2E 1200 ms, TPOT 1.0 / 10 = 100 ms
    # request b: sent 0.5, first 0.9, last 1.5, 4 tokens -> TTFT 400 ms, E2E 1000 ms, TPOT 0.6 / 3 = 200 ms
    f = figures([(0.0, 0.2, 1.2, 50, 11), (0.5, 0.9, 1.5, 30, 4)], gaps=[])
    assert f["ttft_mean_ms"] == pytest.approx(300)
    assert f["ttft_p50_ms"] == pytest.approx(300)
    assert f["ttft_p90_ms"] == pytest.approx(380)  # 200 + 0.9 * (400 - 200)
    assert f["e2e_p50_ms"] == pytest.approx(1100)
    assert f["e2e_p99_ms"] == pytest.approx(1198)  # 1000 + 0.99 * 200
    assert f["tpot_p50_ms"] == pytest.approx(150)
    assert f["tpot_mean_ms"] == pytest.approx(150)
    assert f["itl_p50_ms"] is None  # no chunk times kept


def test_a_one_token_request_has_no_tpot():
    f = figures([(0.0, 0.1, 0.1, 512, 1)], gaps=[])
    assert f["tpot_p50_ms"] is None and f["tpot_mean_ms"] is None
    assert f["ttft_p50_ms"] == pytest.approx(100)


def test_throughputs_over_first_send_to_last_finish():
    # 2 requests from 0.0 to 1.5 s: 2 / 1.5 requests/s; (50 + 30) prompt + (11 + 4) output tokens = 95 / 1.5
    f = figures([(0.0, 0.2, 1.2, 50, 11), (0.5, 0.9, 1.5, 30, 4)], gaps=[])
    assert f["request_rps"] == pytest.approx(2 / 1.5)
    assert f["output_tok_s"] == pytest.approx(15 / 1.5)
    assert f["total_tok_s"] == pytest.approx(95 / 1.5)
    windowed = figures([(0.0, 0.2, 1.2, 50, 11), (0.5, 0.9, 1.5, 30, 4)], gaps=[], duration_s=4.0)
    assert windowed["request_rps"] == pytest.approx(0.5)
    assert windowed["total_tok_s"] == pytest.approx(95 / 4)


def test_itl_pools_every_chunk_gap_of_the_cell():
    # gaps 10, 20 ms (request a) and 30 ms (request b): pooled, not averaged per request first
    records = [RequestRecord("a", "c", 1, "prose", 3, t_send=0.0, t_first=0.1, t_last=0.13, prompt_tokens=5,
                             completion_tokens=3, chunk_times=[0.1, 0.11, 0.13]),
               RequestRecord("b", "c", 1, "prose", 2, t_send=0.0, t_first=0.2, t_last=0.23, prompt_tokens=5,
                             completion_tokens=2, chunk_times=[0.2, 0.23])]
    s = summarize_cell(CellSpec("c", "decode", "prose", 1, 2, 3), records, OK)
    assert s["itl_p50_ms"] == pytest.approx(20)
    assert s["itl_mean_ms"] == pytest.approx(20)
    assert s["itl_p90_ms"] == pytest.approx(28)  # 20 + 0.8 * 10
    # TPOT of a: 0.03 / 2 = 15 ms; of b: 0.03 / 1 = 30 ms
    assert s["tpot_p50_ms"] == pytest.approx(22.5)


def test_failed_requests_count_in_no_figure():
    records = [RequestRecord("a", "c", 2, "prose", 2, t_send=0.0, t_first=0.1, t_last=0.2, prompt_tokens=5,
                             completion_tokens=2),
               RequestRecord("b", "c", 2, "prose", 2, t_send=0.0, t_last=5.0, error="ReadTimeout")]
    s = summarize_cell(CellSpec("c", "decode", "prose", 2, 2, 2), records, OK)
    assert s["e2e_p99_ms"] == pytest.approx(200)
    assert s["request_rps"] == pytest.approx(1 / 0.2)


def _old_run_tables():
    """A run sealed before the latency columns: its cells without them, its raw requests and chunks."""
    cells = pd.DataFrame([{"cell_id": "decode-prose-c1", "kind": "decode", "wall_s": 2.0, "valid": True},
                          {"cell_id": "load-2rps", "kind": "load", "wall_s": 9.0, "achieved_rps": 0.5,
                           "valid": True}])
    requests = pd.DataFrame([
        {"request_id": "d0", "cell_id": "decode-prose-c1", "t_send": 0.0, "t_first": 0.1, "t_last": 1.0,
         "prompt_tokens": 10, "completion_tokens": 10, "error": None, "measured": True},
        {"request_id": "d1", "cell_id": "decode-prose-c1", "t_send": 1.0, "t_first": 1.3, "t_last": 2.0,
         "prompt_tokens": 10, "completion_tokens": 8, "error": None, "measured": True},
        {"request_id": "w0", "cell_id": "load-2rps", "t_send": 0.0, "t_first": 0.5, "t_last": 1.0,
         "prompt_tokens": 4, "completion_tokens": 2, "error": None, "measured": False},  # warm-up: left out
        {"request_id": "l0", "cell_id": "load-2rps", "t_send": 1.0, "t_first": 1.2, "t_last": 1.4,
         "prompt_tokens": 4, "completion_tokens": 2, "error": None, "measured": True},
    ])
    chunks = pd.DataFrame([{"request_id": "d0", "gap_s": None}, {"request_id": "d0", "gap_s": 0.05},
                           {"request_id": "d1", "gap_s": 0.15}, {"request_id": "w0", "gap_s": 0.5}])
    return cells, requests, chunks


def test_a_run_recorded_before_the_columns_gets_them_from_its_raw_tables():
    cells, requests, chunks = _old_run_tables()
    out = with_latency(cells, requests, chunks)
    assert list(out.columns[:len(cells.columns)]) == list(cells.columns)  # nothing lost or renamed
    decode, load = out.to_dict("records")
    assert decode["ttft_p50_ms"] == pytest.approx(200)  # 100 and 300 ms
    assert decode["tpot_p50_ms"] == pytest.approx((100 + 100) / 2)  # 0.9 / 9 and 0.7 / 7
    assert decode["itl_p50_ms"] == pytest.approx(100)  # 50 and 150 ms
    assert decode["request_rps"] == pytest.approx(2 / 2.0)  # over the cell's recorded wall time
    # the open-loop cell: only the measured request; its window is what its achieved rate implies (1 / 0.5 = 2 s)
    assert load["ttft_p50_ms"] == pytest.approx(200)
    assert load["itl_p50_ms"] is None or load["itl_p50_ms"] != load["itl_p50_ms"]
    assert load["request_rps"] == pytest.approx(0.5)
    assert load["total_tok_s"] == pytest.approx(6 / 2)


def test_a_run_that_has_the_columns_is_left_as_recorded():
    cells, requests, chunks = _old_run_tables()
    recorded = cells.assign(**{column: 1.0 for column in LATENCY_COLUMNS})
    assert with_latency(recorded, requests, chunks) is recorded
    assert with_latency(cells, None, None) is cells  # no raw requests kept: nothing to compute from


# The figures as servebook computed them before issue 52, a Python step per request: the reference the stored and
# vectorized figures must equal exactly (a page must not change because its figures were stored at seal).
def _reference_quantile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def _reference_statistics(name, seconds):
    values = [1000 * v for v in seconds]
    return {f"{name}_mean_ms": sum(values) / len(values) if values else None,
            **{f"{name}_{stat}_ms": _reference_quantile(values, q) for stat, q in (("p50", 0.5), ("p90", 0.9),
                                                                                    ("p99", 0.99))}}


def _reference_figures(requests, gaps, duration_s=None):
    done = [(send, first, last, prompt or 0, tokens) for send, first, last, prompt, tokens in requests
            if first is not None and last is not None]
    tpots = [(last - first) / (tokens - 1) for _, first, last, _, tokens in done if tokens is not None and tokens > 1]
    if duration_s is None and done:
        duration_s = max(r[2] for r in done) - min(r[0] for r in done)
    output, prompt = sum(r[4] or 0 for r in done), sum(r[3] for r in done)

    def per_second(n):
        return n / duration_s if done and duration_s else None

    return {**_reference_statistics("ttft", [first - send for send, first, _, _, _ in done]),
            **_reference_statistics("tpot", tpots), **_reference_statistics("itl", gaps),
            **_reference_statistics("e2e", [last - send for send, _, last, _, _ in done]),
            "request_rps": per_second(len(done)), "output_tok_s": per_second(output),
            "total_tok_s": per_second(prompt + output),
            # the samples behind each latency (measure.figures.tails judges whether a percentile has enough)
            "ttft_n": len(done), "tpot_n": len(tpots), "itl_n": len(gaps), "e2e_n": len(done)}


def _value(v):
    return None if v is None or pd.isna(v) else v


def _reference_cell(cell, requests, chunks):
    from servebook.measure.kinds import traits_of

    mine = requests[(requests["cell_id"] == cell["cell_id"]) & requests["error"].isna()
                    & requests["completion_tokens"].notna()]
    duration = _value(cell.get("wall_s"))
    if traits_of(cell.get("kind")).open_loop:
        if "measured" in mine:
            mine = mine[mine["measured"].astype(bool)]
        achieved = cell.get("achieved_rps")
        duration = len(mine) / achieved if achieved and achieved == achieved and len(mine) else None
    gaps = []
    if chunks is not None and not chunks.empty:
        own = chunks[chunks["request_id"].isin(set(mine["request_id"])) & chunks["gap_s"].notna()]
        gaps = [float(g) for g in own["gap_s"]]
    rows = ((float(r.t_send), _value(r.t_first), _value(r.t_last), _value(r.prompt_tokens),
             _value(r.completion_tokens)) for r in mine.itertuples())
    return _reference_figures(rows, gaps, duration)


def _recorded_runs():
    from pathlib import Path

    tests = Path(__file__).resolve().parents[2]
    return sorted(p for root in (tests / "unit" / "journal" / "recorded_judgements" / "kinds-sim-journal",
                                 tests / "fixtures" / "journal-v0.1.0") for p in (root / "runs").iterdir()
                  if (p / "cells.parquet").is_file() and (p / "requests.parquet").is_file())


def test_figures_from_stored_tables_equal_the_per_request_computation_exactly_on_recorded_journals():
    from servebook.measure.figures.latency_tables import table_figures
    from servebook.measure.kinds import traits_of

    runs = _recorded_runs()
    assert len(runs) >= 3
    compared = 0
    for run in runs:
        cells = pd.read_parquet(run / "cells.parquet").drop(columns=LATENCY_COLUMNS, errors="ignore")
        requests = pd.read_parquet(run / "requests.parquet")
        chunks = pd.read_parquet(run / "chunks.parquet") if (run / "chunks.parquet").is_file() else None
        for cell, found in zip(cells.to_dict("records"), table_figures(cells, requests, chunks), strict=True):
            expected = {} if traits_of(cell.get("kind")).derived else _reference_cell(cell, requests, chunks)
            assert found == expected, (run.name, cell["cell_id"])  # equal, not approximately
            compared += bool(expected.get("ttft_p50_ms"))
    assert compared >= 10


def test_figures_of_records_equal_the_per_request_computation_exactly():
    import random

    rng = random.Random(52)
    for n in (0, 1, 2, 7, 300):
        rows = []
        for _ in range(n):
            send = rng.uniform(0, 100)
            first = None if rng.random() < 0.1 else send + rng.uniform(0.001, 2)
            rows.append((send, first, None if first is None else first + rng.uniform(0, 5),
                         rng.choice([None, 0, 17, 512]), rng.choice([None, 1, 2, 64])))
        gaps = [rng.uniform(0.001, 0.2) for _ in range(3 * n)]
        for duration in (None, 12.5):
            assert figures(rows, gaps, duration) == _reference_figures(rows, gaps, duration)
