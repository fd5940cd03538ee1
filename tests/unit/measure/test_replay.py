"""Trace replay: the reader's two formats, the blocks a hash id stands for, and the ideal prefix hit rate."""

import json

import pytest

from servebook.config import Plan
from servebook.config.load import ReplayPlan
from servebook.config.traces import TraceRow, block_lengths, ideal_cached, ideal_hit_rate, read_rows, replayed
from servebook.measure.kinds import plan_cells
from servebook.measure.kinds.replay.blocks import make_blocks, replay_figures, run_salt
from servebook.measure.openloop import read_trace
from servebook.measure.transport.client import RequestRecord
from servebook.util.errors import InputError

FILLER = list(range(1000, 1400)) * 3


def _write(tmp_path, lines):
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def test_reads_mooncake_lines_with_their_hash_ids_in_arrival_order(tmp_path):
    path = _write(tmp_path, [{"timestamp": 3000, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]},
                             {"timestamp": 1000, "input_length": 512, "output_length": 7, "hash_ids": [1]}])
    rows = read_rows(path)
    assert rows == [TraceRow(0.0, 512, 7, (1,)), TraceRow(2.0, 600, 5, (1, 2))]
    assert read_trace(path) == [(0.0, 512, 7), (2.0, 600, 5)]  # what the load kind reads of it


def test_reads_the_plain_format_without_hash_ids(tmp_path):
    path = _write(tmp_path, [{"timestamp": 0, "prompt_tokens": 100, "output_tokens": 9},
                             {"timestamp": 250, "input_tokens": 80, "max_tokens": 4}])
    assert read_rows(path) == [TraceRow(0.0, 100, 9), TraceRow(0.25, 80, 4)]
    assert ideal_hit_rate(read_rows(path)) is None  # no prefix structure to compute it from


@pytest.mark.parametrize("line", [{"timestamp": 0, "input_length": 10}, {"input_length": 10, "output_length": 2},
                                  {"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": "12"},
                                  {"timestamp": 0, "input_length": 0, "output_length": 2}])
def test_a_bad_line_is_refused_with_its_place(tmp_path, line):
    with pytest.raises(ValueError, match=r"trace.jsonl:1: a trace line needs"):
        read_rows(_write(tmp_path, [line]))


def test_the_shipped_trace_reads_and_has_prefix_structure():
    rows = read_rows("shipped:mooncake-small.jsonl")
    assert 40 <= len(rows) <= 80 and rows[-1].arrival_s < 60
    assert max(r.input_tokens + r.output_tokens for r in rows) < 2048  # four slots of the tiny model at 8,192 tokens hold them
    assert 0.4 < (ideal_hit_rate(rows) or 0) < 0.8
    with pytest.raises(ValueError, match="ships no such trace"):
        read_rows("shipped:nothing.jsonl")
    with pytest.raises(InputError, match="no such trace file"):
        read_rows("/nonexistent/trace.jsonl")


def test_a_hash_id_is_the_same_tokens_wherever_it_occurs_and_a_partial_block_is_its_prefix():
    blocks = make_blocks(FILLER, run_salt("run-a"))
    a = blocks.prompt(TraceRow(0, 1100, 2, (7, 8, 9)), 0, 512)
    b = blocks.prompt(TraceRow(0, 1024 + 300, 2, (7, 8, 11)), 1, 512)
    assert len(a) == 1100 and len(b) == 1324
    assert a[:1024] == b[:1024]  # blocks 7 and 8 shared
    assert a[1024] != b[1024]  # the third block differs from its first token on
    assert blocks.block(9, 76) == blocks.block(9, 512)[:76]
    assert block_lengths(TraceRow(0, 1100, 2)) == [512, 512, 76]


def test_another_run_spells_the_same_block_otherwise_and_a_plain_trace_shares_nothing():
    one, other = make_blocks(FILLER, run_salt("run-a")), make_blocks(FILLER, run_salt("run-b"))
    assert one.block(7, 512)[0] != other.block(7, 512)[0]  # a cold cache at the start of every run
    plain = [one.prompt(TraceRow(0, 600, 2), i, 512) for i in range(2)]
    assert plain[0][0] != plain[1][0]


def test_the_ideal_hit_rate_counts_only_a_common_leading_run_of_blocks():
    rows = [TraceRow(0, 1024, 2, (1, 2)),
            TraceRow(1, 1536, 2, (1, 2, 3)),  # 1024 of its 1536 seen
            TraceRow(2, 1024, 2, (4, 2)),  # block 2 after another first block: no prefix, nothing reusable
            TraceRow(3, 700, 2, (1, 5)),  # block 1 only: 512
            TraceRow(4, 1024, 2, (1, 5))]  # block 5 seen with 188 tokens: 512 + 188
    assert ideal_cached(rows, 512) == [0, 1024, 0, 512, 700]
    assert ideal_hit_rate(rows, 512) == pytest.approx((1024 + 512 + 700) / (1024 + 1536 + 1024 + 700 + 1024))


def test_a_prompt_seen_whole_leaves_its_last_token_to_compute():
    rows = [TraceRow(0, 512, 2, (1,)), TraceRow(1, 512, 2, (1,))]
    assert ideal_hit_rate(rows, 512) == pytest.approx(511 / 1024)


def test_replayed_scales_and_cuts_the_trace():
    rows = [TraceRow(float(t), 100, 1, (t,)) for t in range(10)]
    plan = ReplayPlan(trace="x", time_scale=0.5, max_duration_s=3.0, max_requests=5)
    out = replayed(rows, plan)
    assert [r.arrival_s for r in out] == [0.0, 0.5, 1.0, 1.5, 2.0] and all(r.output_tokens == 2 for r in out)
    assert len(replayed(rows, ReplayPlan(trace="x", time_scale=0.25, max_duration_s=1.0))) == 5


def test_the_cell_reports_its_measured_hit_rate_beside_the_ideal():
    rows = [TraceRow(0, 512, 2, (1,)), TraceRow(1, 512, 2, (1,))]
    records = [RequestRecord(f"r{i}", "replay", 0, "prose", 2, t_send=0.0, prompt_tokens=512, cached_tokens=c,
                             completion_tokens=2)
               for i, c in enumerate((0, 400))]
    figures = replay_figures(rows, records, ReplayPlan(trace="x"))
    assert figures["ideal_hit_rate"] == pytest.approx(511 / 1024)
    assert figures["measured_hit_rate"] == pytest.approx(400 / 1024)
    records[1].cached_tokens = None  # not reported is not none cached
    assert replay_figures(rows, records, ReplayPlan(trace="x"))["measured_hit_rate"] is None


def test_a_replay_is_judged_on_its_own_ttft_p90_and_hit_rate_and_its_rules_select_no_cells():
    from pydantic import ValidationError

    from servebook.config.rules import ComparisonRule

    rows = [TraceRow(i, 512, 2, (1,)) for i in range(10)]
    records = [RequestRecord(f"r{i}", "replay", 0, "prose", 2, t_send=0.0, t_first=0.01 * (i + 1), prompt_tokens=512,
                             cached_tokens=0, completion_tokens=2) for i in range(10)]
    records.append(RequestRecord("failed", "replay", 0, "prose", 2, t_send=0.0, t_first=9.0, error="boom"))
    figures = replay_figures(rows, records, ReplayPlan(trace="x"))
    assert figures["replay_ttft_p90_s"] == pytest.approx(0.09), "nearest rank over the requests that completed"
    for metric in ("replay_ttft_p90_s", "measured_hit_rate"):
        assert ComparisonRule(metric=metric, max_regression_pct=20).kind == "replay"
        with pytest.raises(ValidationError, match="a run replays one trace"):
            ComparisonRule(metric=metric, concurrency=[4], max_regression_pct=20)


def test_a_plan_with_a_replay_section_has_one_replay_cell_and_plans_without_keep_their_ids():
    plan = Plan.model_validate({"decode": None, "prefill": None,
                                "replay": {"trace": "shipped:mooncake-small.jsonl", "time_scale": 0.25}})
    (cell,) = plan_cells(plan)
    assert (cell.kind, cell.n_requests) == ("replay", 40)
    assert "replay" in plan.needs_tokenizer
    assert "replay" not in Plan().canonical_json()
    assert plan.longest_requests() == [("replay", max(r.input_tokens + max(r.output_tokens, 2)
                                                      for r in read_rows("shipped:mooncake-small.jsonl")))]


def test_a_trace_on_object_storage_reads_through_its_url():
    import fsspec

    with fsspec.open("memory://traces/t.jsonl", "wt") as handle:
        handle.write(json.dumps({"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [4, 5]}) + "\n")
    assert read_rows("memory://traces/t.jsonl") == [TraceRow(0.0, 600, 3, (4, 5))]


def test_the_run_table_shows_the_two_hit_rates_side_by_side():
    import pandas as pd

    from servebook.present.tables import kind_tables

    cells = pd.DataFrame([{"kind": "replay", "cell_id": "replay", "category": "prose", "requests": 24,
                           "ideal_hit_rate": 0.48, "measured_hit_rate": 0.43, "ttft_s": 2.7, "ttft_p90_s": 7.1,
                           "valid": True, "reconciliation": "ok", "invalid_reasons": ""}])
    (table,) = kind_tables(cells)
    assert table.title == "Trace replay"
    assert table.rows[0].values[:3] == [24, "48%", "43%"]
