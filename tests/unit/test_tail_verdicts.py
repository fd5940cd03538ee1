"""Verdicts never rest on an insufficient tail (issue 55): a rule whose figure is a percentile read from fewer samples
than its confidence needs (measure.figures.tails) leaves the verdict inconclusive, with the code `insufficient` and a reason
that names the cell and the samples; JSON, JUnit and the ranking read the code."""

import json

import pandas as pd

from servebook.config import ComparisonRule, VerdictRules
from servebook.journal import Manifest
from servebook.verdicts import judge_runs
from servebook.verdicts.ranking import Entrant, answer

RULES = VerdictRules(rules=[ComparisonRule(metric="itl_p99_s", concurrency=[4], max_regression_pct=10),
                            ComparisonRule(metric="aggregate_tok_s", concurrency=[4], max_regression_pct=10)])
DONE = Manifest(status="completed")


def run(itl_p99_s: float, gaps: int | None, rate: float = 100.0) -> pd.DataFrame:
    row = {"cell_id": "decode-prose-c4", "kind": "decode", "category": "prose", "concurrency": 4,
           "target_prompt_tokens": None, "aggregate_tok_s": rate, "itl_p99_s": itl_p99_s, "valid": True,
           "invalid_reasons": "", "reconciliation": "ok"}
    if gaps is not None:
        row["itl_n"] = gaps
    return pd.DataFrame([row])


def judged(gaps: int | None, candidate_gaps: int | None = None):
    baseline = [run(0.020 * f, gaps, 100 * f) for f in (1.0, 1.02, 0.98)]
    mine = [(DONE, run(0.0201 * f, gaps if candidate_gaps is None else candidate_gaps, 101 * f))
            for f in (1.0, 0.99, 1.01)]
    return judge_runs(mine, baseline, RULES, is_baseline=False)


def test_a_p99_of_forty_gaps_leaves_the_verdict_inconclusive_naming_cell_and_samples():
    verdict = judged(gaps=40)
    assert verdict.outcome == "inconclusive" and not verdict.undecided  # more runs will not decide it
    [itl] = [c for c in verdict.comparisons if c.metric == "itl_p99_s"]
    assert itl.decision == "insufficient" and not itl.ok and not itl.better
    assert (itl.tail_samples, itl.tail_needed) == (40, 662)
    [reason] = [r for r in verdict.reasons if "insufficient tail" in r]
    assert "decode-prose-c4 rests on 40 samples, fewer than the 662 a p99 needs at 99% confidence" in reason
    assert reason.startswith("inconclusive: ITL p99, prose at 4 requests")
    # the rule judged on a sufficient figure still judges as before
    [rate] = [c for c in verdict.comparisons if c.metric == "aggregate_tok_s"]
    assert rate.decision == "pass"


def test_the_thinnest_side_decides_and_enough_gaps_judge_as_before():
    assert judged(gaps=5000).outcome == "accepted"
    thin = judged(gaps=5000, candidate_gaps=300)
    assert thin.outcome == "inconclusive"
    assert [c.tail_samples for c in thin.comparisons if c.decision == "insufficient"] == [300]
    # a run recorded without counts is judged as it was: nothing says its tail is thin
    assert judged(gaps=None).outcome == "accepted"


def test_the_ranking_reads_the_code_and_events_keep_their_shape_without_a_thin_tail():
    verdict = judged(gaps=40)
    event = json.loads(json.dumps(verdict.to_event()))
    [itl] = [c for c in event["comparisons"] if c["metric"] == "itl_p99_s"]
    assert itl["decision"] == "insufficient" and itl["tail_samples"] == 40
    sound = json.loads(json.dumps(judged(gaps=5000).to_event()))
    assert all("tail_samples" not in c for c in sound["comparisons"])  # verdicts without one read as before
    ranked = answer("s", None, "baseline", [Entrant("thin", verdict.outcome, verdict.comparisons, verdict.reasons)])
    [standing] = ranked.standings
    assert "insufficient tail" in standing.cells_text() and "more requests per cell" in standing.cells_text()
