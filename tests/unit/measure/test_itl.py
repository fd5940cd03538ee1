"""Inter-token latency per decode cell (measure.figures.itl): chunk gaps pooled over requests, their p50/p95/p99 and the
longest, tokens per chunk, and the per-token figure where a drafter's accepted run arrives as one chunk."""

import pytest

from servebook.measure.cells import CellSpec, summarize_cell
from servebook.measure.figures.itl import chunk_token_counts, itl_figures, per_token_gaps
from servebook.measure.observers.reconcile import Check, Reconciliation
from servebook.measure.transport.client import RequestRecord

OK = Reconciliation("ok", [Check("generated tokens", 10, 10)])


def record(name, times, tokens, chunk_tokens=None, error=None):
    return RequestRecord(name, "decode-prose-c1", 1, "prose", tokens, t_send=times[0] - 0.5, t_first=times[0],
                         t_last=times[-1], prompt_tokens=10, completion_tokens=tokens, cached_tokens=0,
                         chunk_times=list(times), chunk_tokens=list(chunk_tokens or []), error=error)


def test_gaps_pool_over_requests_with_the_first_gap_after_ttft_counted():
    # a: chunks at 1.0, 1.01, 1.03, 1.33 -> gaps 10, 20, 300 ms; b: 2.0, 2.04 -> 40 ms. TTFT (0.5 s) is no gap.
    f = itl_figures([record("a", [1.0, 1.01, 1.03, 1.33], 4), record("b", [2.0, 2.04], 2)])
    # sorted gaps 0.01, 0.02, 0.04, 0.3: p50 at rank 1.5 -> 0.03; p95 at 2.85 -> 0.04 + 0.85 * 0.26
    assert f["itl_p50_s"] == pytest.approx(0.03)
    assert f["itl_p95_s"] == pytest.approx(0.04 + 0.85 * 0.26)
    assert f["itl_p99_s"] == pytest.approx(0.04 + 0.97 * 0.26)
    assert f["itl_max_s"] == pytest.approx(0.3)
    assert f["itl_tokens_per_chunk"] == pytest.approx(1.0)
    # one token per chunk (as many chunks as tokens): the per-token figure is the gap itself
    assert f["itl_token_p50_s"] == pytest.approx(0.03)


def test_speculative_chunks_carry_several_tokens():
    # the engine reported usage on every chunk: 1, then a drafter's run of 3, then 1, then 3 (8 tokens, 4 chunks)
    spec = record("s", [1.0, 1.06, 1.08, 1.14], 8, chunk_tokens=[1, 3, 1, 3])
    assert chunk_token_counts(spec) == [1, 3, 1, 3]
    # gaps 60, 20, 60 ms ended by chunks of 3, 1, 3 tokens: 20, 20, 20 ms per token
    assert per_token_gaps(spec) == pytest.approx([0.02, 0.02, 0.02])
    f = itl_figures([spec])
    assert f["itl_p50_s"] == pytest.approx(0.06) and f["itl_max_s"] == pytest.approx(0.06)
    assert f["itl_tokens_per_chunk"] == pytest.approx(2.0)
    assert f["itl_token_p50_s"] == pytest.approx(0.02) and f["itl_token_p99_s"] == pytest.approx(0.02)


def test_unknown_tokens_per_chunk_give_no_per_token_figure():
    # 6 tokens in 3 chunks and no per-chunk usage (llama.cpp with a drafter): the mean is known, the split is not
    f = itl_figures([record("u", [1.0, 1.05, 1.1], 6)])
    assert f["itl_tokens_per_chunk"] == pytest.approx(2.0)
    assert f["itl_token_p50_s"] is None
    assert f["itl_p50_s"] == pytest.approx(0.05)


def test_a_chunk_of_no_new_token_hands_its_wait_to_the_next():
    r = record("z", [1.0, 1.01, 1.05], 2, chunk_tokens=[1, 0, 1])
    assert per_token_gaps(r) == pytest.approx([0.05])


def test_failed_requests_and_cells_without_chunk_times_have_no_itl():
    failed = record("f", [1.0, 1.5], 2, error="ReadTimeout")
    assert itl_figures([failed])["itl_p99_s"] is None
    bare = RequestRecord("n", "c", 1, "prose", 4, t_send=0.0, t_first=0.1, t_last=0.4, completion_tokens=4)
    assert itl_figures([bare]) == {k: None for k in itl_figures([bare])}


def test_decode_cells_carry_the_itl_figures_and_prefill_cells_do_not():
    records = [record("a", [1.0, 1.01, 1.03, 1.33], 4), record("b", [2.0, 2.01, 2.02, 2.04], 4)]
    decode = summarize_cell(CellSpec("decode-prose-c1", "decode", "prose", 1, 2, 4), records, OK)
    assert decode["itl_max_s"] == pytest.approx(0.3)
    assert decode["itl_p99_s"] == pytest.approx(decode["itl_p99_ms"] / 1000)  # the peers' figure, in seconds
    prefill = summarize_cell(CellSpec("prefill-256", "prefill", "prose", 1, 2, 1, 256), records, OK)
    assert "itl_p99_s" not in prefill
