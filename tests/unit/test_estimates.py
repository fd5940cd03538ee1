"""The statistics of verdicts on synthetic runs with known answers: runs are the unit, intervals decide."""

import math

import numpy as np
import pandas as pd
import pytest

from servebook.config import ComparisonRule, VerdictRules
from servebook.estimates import Estimate, change, decide, repeats_to_decide, runs_needed_for
from servebook.journal import Manifest
from servebook.verdicts import baseline_evidence, judge_runs, undisturbed

DONE = Manifest(status="completed")


def run_cells(prose_c4: float, code_c4: float, prose_c1: float = 100.0) -> pd.DataFrame:
    rows = []
    for category, c, v in (("prose", 1, prose_c1), ("prose", 4, prose_c4), ("code", 4, code_c4)):
        rows.append({"cell_id": f"decode-{category}-c{c}", "kind": "decode", "category": category, "concurrency": c,
                     "target_prompt_tokens": None, "aggregate_tok_s": v, "valid": True, "invalid_reasons": "",
                     "reconciliation": "ok"})
    return pd.DataFrame(rows)


def test_estimate_interval_is_the_t_interval_over_runs():
    estimate = Estimate.of([10.0, 12.0, 11.0, 13.0])
    assert estimate.mean == pytest.approx(11.5)
    half = 3.182446 * np.std([10, 12, 11, 13], ddof=1) / 2  # t(0.975, 3) * sd / sqrt(4)
    assert estimate.low == pytest.approx(11.5 - half, rel=1e-5) and estimate.high == pytest.approx(11.5 + half, rel=1e-5)
    assert Estimate.of([5.0]).low is None


def test_change_of_equal_samples_straddles_zero_and_a_clear_drop_does_not():
    same = change([100, 104, 96, 101], [99, 103, 97, 100])
    assert same.low < 0 < same.high
    drop = change([70, 71, 69, 70.5], [100, 101, 99, 100.5])
    assert drop.pct == pytest.approx(-30, abs=1) and drop.high < -25
    assert change([1.0], [2.0]).has_interval is False


def test_decisions_pass_fail_and_straddle():
    assert decide(change([99.5, 100.5, 100, 99.8], [100, 100.2, 99.9, 100.1]), 7, False) == "pass"
    assert decide(change([60, 62, 61], [100, 101, 99]), 7, False) == "fail"
    straddle = change([91, 97, 88, 99], [100, 101, 99, 100])  # about -6%, noisy: the -7% limit is inside
    assert decide(straddle, 7, False) == "straddle"
    needed = repeats_to_decide(straddle, 7, False)
    assert needed is None or needed > 4


def test_a_clearly_failing_cell_among_passing_ones_is_named():
    rng = np.random.default_rng(7)
    baseline = [run_cells(200 * rng.normal(1, 0.01), 200 * rng.normal(1, 0.01)) for _ in range(4)]
    mine = [run_cells(130 * rng.normal(1, 0.01), 205 * rng.normal(1, 0.01)) for _ in range(4)]
    rules = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[1, 4], max_regression_pct=7)])
    verdict = judge_runs([(DONE, c) for c in mine], baseline, rules, is_baseline=False)
    assert verdict.outcome == "rejected"
    assert verdict.reasons[0].startswith("aggregate decode, prose at 4 requests: -3")
    # Holm's rule is the verdict's method, said once, not with every cell
    assert "[" in verdict.reasons[0] and verdict.reasons[0].endswith("(limit -7%)")
    assert verdict.comparisons[0].holm_cells == 3 and "Holm" in (verdict.method or "")
    assert not any("code at 4" in r for r in verdict.reasons if not r.startswith(("within", "better beyond")))
    assert any(r.startswith("better beyond the noise: aggregate decode, code at 4") for r in verdict.reasons)
    typed = verdict.to_event()["comparisons"][0]
    assert isinstance(typed["ok"], bool) and isinstance(typed["runs"], int)


def test_a_straddling_cell_makes_the_verdict_inconclusive_with_the_repeats_it_needs():
    baseline = [run_cells(v, 200) for v in (200, 196, 204, 200)]
    mine = [run_cells(v, 200) for v in (186, 196, 178, 190)]  # about -6% with a wide spread
    rules = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[4], category="prose",
                                               max_regression_pct=7)])
    verdict = judge_runs([(DONE, c) for c in mine], baseline, rules, is_baseline=False)
    assert verdict.outcome == "inconclusive"
    assert verdict.reasons[0].startswith("inconclusive: aggregate decode, prose at 4 requests: -")


def test_the_baseline_against_itself_is_not_rejected():
    rng = np.random.default_rng(3)
    rules = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[1, 4], max_regression_pct=7)])
    rejected = 0
    for _ in range(20):
        runs = [run_cells(*(200 * rng.normal(1, 0.02, 2)), prose_c1=100 * rng.normal(1, 0.02)) for _ in range(6)]
        verdict = judge_runs([(DONE, c) for c in runs[:3]], runs[3:], rules, is_baseline=False)
        rejected += verdict.outcome == "rejected"
    assert rejected == 0


def test_runs_needed_grow_as_the_limit_tightens_against_the_noise():
    assert runs_needed_for(20, 5) <= runs_needed_for(7, 5) <= runs_needed_for(3, 5)
    assert runs_needed_for(7, 0.5) == 2
    assert math.isfinite(runs_needed_for(7, 10) or math.inf)


def test_disturbed_cells_leave_the_statistics_and_are_named():
    baseline = [run_cells(v, 200) for v in (200, 198, 202, 201)]
    mine = [run_cells(v, 200) for v in (199, 201, 200, 40)]
    disturbed = mine[3]
    disturbed.loc[disturbed.cell_id == "decode-prose-c4", ["valid", "invalid_reasons"]] = [
        False, "gpu busy: other processes (777) on the engine's GPU during the cell"]
    runs = [(Manifest(status="completed", run_id=f"r{i}"), c) for i, c in enumerate(mine)]
    rules = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[4], category="prose",
                                               max_regression_pct=7)])
    verdict = judge_runs(runs, baseline, rules, is_baseline=False)
    assert verdict.outcome != "rejected"
    assert [(c.run_id, c.cell_id, c.codes) for c in verdict.left_out_cells] == [("r3", "decode-prose-c4", ("gpu_busy",))]
    assert "1 cell of 1 run left out: GPU busy 1" in verdict.lines()
    assert verdict.comparisons[0].runs == 3


def stalled(cells: pd.DataFrame, cell_id: str) -> pd.DataFrame:
    cells = cells.copy()
    cells.loc[cells.cell_id == cell_id, ["valid", "invalid_reasons", "invalid_codes"]] = [
        False, "client stalled: 3 of 4 requests read tokens faster than the engine made them", "client_stall"]
    return cells


RULE_C1_C4 = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[1, 4], category="prose",
                                                max_regression_pct=7)])


def test_a_cell_disturbed_in_every_candidate_run_is_not_accepted_on_the_other_cells_alone():
    # the candidate's 4-request cell was disturbed and left out: its 1-request cell alone once accepted the rule
    baseline = [run_cells(300, 200)]
    verdict = judge_runs([(DONE, stalled(run_cells(200, 200), "decode-prose-c4"))], baseline, RULE_C1_C4,
                         is_baseline=False)
    assert verdict.outcome == "inconclusive" and verdict.undecided and not verdict.settled
    assert verdict.reasons[0].startswith("inconclusive: aggregate decode, decode-prose-c4: every candidate run")


def test_a_baseline_cell_disturbed_in_every_run_leaves_the_candidate_undecided_not_rejected():
    # once "no matching cells in both runs": rejected, and settled, for the baseline's lost evidence
    baseline = stalled(run_cells(300, 200), "decode-prose-c4")
    verdict = judge_runs([(DONE, run_cells(200, 200))], baseline_evidence([baseline]), RULE_C1_C4, is_baseline=False,
                         baseline_disturbed=[undisturbed(baseline)[1]])
    assert verdict.outcome == "inconclusive" and verdict.undecided
    assert "every baseline run of this cell was disturbed" in verdict.reasons[0] and "run the baseline again" in \
        verdict.reasons[0]
    only_c4 = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[4], category="prose",
                                                 max_regression_pct=7)])
    assert judge_runs([(DONE, run_cells(200, 200))], baseline_evidence([baseline]), only_c4, is_baseline=False,
                      baseline_disturbed=[undisturbed(baseline)[1]]).outcome == "inconclusive"
    # a rule no run of either side has a cell for is still a rejection that more runs cannot change
    prefill = VerdictRules(rules=[ComparisonRule(metric="prefill_tok_s", prompt_tokens=[8192], max_regression_pct=7)])
    lost = judge_runs([(DONE, run_cells(200, 200))], [run_cells(300, 200)], prefill, is_baseline=False)
    assert lost.outcome == "rejected" and lost.settled
