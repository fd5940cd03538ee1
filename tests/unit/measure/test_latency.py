"""The peers' latency percentiles and throughputs (measure.latency), each against a small example worked by hand."""

import pandas as pd
import pytest

from servebook.measure.cells import CellSpec, summarize_cell
from servebook.measure.client import RequestRecord
from servebook.measure.latency import LATENCY_COLUMNS, figures, quantile, with_latency
from servebook.measure.reconcile import Check, Reconciliation

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
