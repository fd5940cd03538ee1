"""Words once (issue 55, item 5): the cells a verdict leaves out as disturbed are one count per candidate, typed
(run, cell, codes) so every output counts the same, instead of one reason per cell; and a cell's words carry no
multiplicity rule, which the verdict's method says once."""

import pandas as pd

from servebook.config import ComparisonRule, VerdictRules
from servebook.journal import Manifest
from servebook.verdicts import judge_runs
from servebook.verdicts.left_out import LeftOut, LeftOutCell

RULES = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[1, 4, 16], category="prose",
                                           max_regression_pct=7)])
HOST_BUSY = "host busy: other processes used 0.45 CPU cores during the cell (limit 0.4)"
STALLED = "client stalled: 1 of 4 requests read tokens faster than 2x the engine's rate (r0: 31 in 4 ms)"


def cells(values: dict[int, float], disturbed: dict[int, tuple[str, str]] | None = None) -> pd.DataFrame:
    """One run's decode cells at 1, 4 and 16 requests; `disturbed`: concurrency -> (codes, text) of a cell whose
    only faults are other load."""
    rows = []
    for n, value in values.items():
        codes, text = (disturbed or {}).get(n, ("", ""))
        rows.append({"cell_id": f"decode-prose-c{n}", "kind": "decode", "category": "prose", "concurrency": n,
                     "aggregate_tok_s": value, "valid": not codes, "invalid_codes": codes, "invalid_reasons": text,
                     "reconciliation": "ok", "errors": 0})
    return pd.DataFrame(rows)


def test_a_disturbed_baseline_is_one_count_of_its_cells_by_cause_not_a_reason_per_cell():
    """The issue's baseline listed six 'left out: run … (host busy …)' bullets: now one line, every cell counted
    under its codes and its runs named once."""
    busy, stalled = ("host_busy", HOST_BUSY), ("client_stall", STALLED)
    runs = [(Manifest(status="completed", run_id="run-a"), cells({1: 150.0, 4: 400.0, 16: 900.0},
                                                                 {1: busy, 4: busy, 16: stalled})),
            (Manifest(status="completed", run_id="run-b"), cells({1: 260.0, 4: 700.0, 16: 1500.0},
                                                                 {1: busy, 4: busy, 16: stalled})),
            (Manifest(status="completed", run_id="run-c"), cells({1: 262.0, 4: 702.0, 16: 1490.0}))]
    verdict = judge_runs(runs, [], RULES, is_baseline=True)
    assert verdict.outcome == "accepted" and verdict.reasons == ["baseline of the study"]
    assert [(c.run_id, c.cell_id, c.codes) for c in verdict.left_out_cells][:3] == [
        ("run-a", "decode-prose-c1", ("host_busy",)), ("run-a", "decode-prose-c4", ("host_busy",)),
        ("run-a", "decode-prose-c16", ("client_stall",))]
    folded = LeftOut.of(verdict.left_out_cells)
    assert folded.runs == ["run-a", "run-b"] and folded.by_code() == {"host_busy": 4, "client_stall": 2}
    assert folded.text() == "6 cells of 2 runs left out: host busy 4, client stalled 2"
    assert [line for line in verdict.lines() if "left out" in line] == [folded.text()]
    event = verdict.to_event()
    assert not any("left out" in reason for reason in event["reasons"])
    assert [LeftOut.of(event["left_out_cells"]).text()] == [folded.text()]


def test_a_verdict_without_cells_left_out_records_no_field_for_them():
    runs = [(Manifest(status="completed", run_id=f"run-{i}"), cells({1: 260.0 + i, 4: 700.0, 16: 1500.0}))
            for i in range(2)]
    verdict = judge_runs(runs, [], RULES, is_baseline=True)
    assert verdict.left_out_cells == [] and "left_out_cells" not in verdict.to_event()
    assert not LeftOut.of(verdict.left_out_cells) and LeftOut().text() == ""


def test_a_cell_with_two_faults_counts_under_each_and_once_as_a_cell():
    folded = LeftOut.of([LeftOutCell("r1", "c1", ("host_busy", "gpu_busy")), LeftOutCell("r1", "c2", ("gpu_busy",))])
    assert folded.text() == "2 cells of 1 run left out: GPU busy 2, host busy 1"


def test_a_cells_words_leave_the_multiplicity_rule_to_the_method_said_once():
    baseline = [cells({1: 262.0 + i, 4: 700.0 + i, 16: 1500.0 - i}) for i in range(3)]
    runs = [(Manifest(status="completed", run_id=f"run-{i}"), cells({1: 150.0 + i, 4: 690.0 - i, 16: 1495.0 + i}))
            for i in range(3)]
    verdict = judge_runs(runs, baseline, RULES, is_baseline=False)
    failing = [c for c in verdict.comparisons if c.decision == "fail"]
    assert verdict.outcome == "rejected" and failing and failing[0].holm_cells == 3
    assert failing[0].text().endswith("(limit -7%)") and failing[0].text() in verdict.reasons
    assert not any("Holm over" in line for line in verdict.lines())
    assert "Holm" in (verdict.method or "")
