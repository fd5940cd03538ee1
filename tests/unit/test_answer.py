"""A study's answer: intervals at the levels the verdict used (Holm), the recommendation and ranking, and the same
words in the report, the CI Markdown and the site."""

import math
from dataclasses import asdict
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servebook.config import load_study
from servebook.config.rules import ComparisonRule
from servebook.estimates import ALPHA, Contrast
from servebook.present.outputs import as_markdown, report_of_judged
from servebook.present.report import StudyReport, answer_markdown
from servebook.present.site.answer import covering_verdicts, study_answer_of
from servebook.present.site.summary import RunSummary
from servebook.verdicts import Comparison, Judged, Verdict, comparison_of, gate, parse_fail_on, settle
from servebook.verdicts.ranking import Entrant, answer, comparison_from, study_answer

PREFILL = ComparisonRule(metric="prefill_tok_s", prompt_tokens=[2048], max_regression_pct=20)
DECODE = ComparisonRule(metric="aggregate_tok_s", concurrency=[1, 4], max_regression_pct=7)


def cell_of(rule, change_pct, se, cell_id="prefill-2048", df=20, concurrency=None):
    row = {"cell_id": cell_id, "category": "prose", "concurrency": concurrency or 1,
           "target_prompt_tokens": 2048 if rule.kind == "prefill" else None}
    values = [(("", "0"), 100.0), (("", "1"), 101.0), (("", "2"), 99.0)]
    contrast = Contrast(math.log1p(change_pct / 100), se, df, 3, 3, "pooled")
    return comparison_of(rule, row, values, values, contrast, ALPHA)


def test_a_cell_beyond_its_limit_alone_shows_holms_interval_beside_inconclusive():
    # -35% against -20%: beyond the limit at this cell alone, not once five cells are tested together
    lone = cell_of(PREFILL, -35.0, 0.1)
    assert lone.change_high_pct < -20 and lone.decision == "straddle"
    others = [cell_of(PREFILL, 1.0, 0.02, cell_id=f"prefill-{i}") for i in range(4)]
    settle([lone, *others], ALPHA)
    assert lone.decision == "straddle"
    low, high = lone.shown_bounds
    assert low == lone.change_low_pct and high > -20  # the bound that rejects, at Holm's level, reaches the limit
    assert lone.holm_cells == 5 and lone.holm_level == pytest.approx(ALPHA / 5)
    text = lone.text()
    # the interval at Holm's level; the rule itself is the verdict's method, said once beside every cell's
    assert f"[{low:+.1f}, {high:+.1f}]" in text and text.endswith("(limit -20%)")
    assert f"{lone.change_high_pct:+.1f}]" not in text


def test_a_rejected_cell_keeps_its_bound_and_leaves_the_rule_to_the_method():
    bad = cell_of(PREFILL, -50.0, 0.05)
    good = cell_of(PREFILL, 0.0, 0.05, cell_id="prefill-512")
    settle([bad, good], ALPHA)
    assert bad.decision == "fail" and bad.shown_bounds == (bad.change_low_pct, bad.change_high_pct)
    assert bad.holm_cells == 2 and bad.text().endswith("(limit -20%)") and "Holm" not in bad.text()
    assert good.holm_level == pytest.approx(ALPHA)  # one cell left unrejected: its own level


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-60, 30), st.floats(0.005, 0.3)), min_size=1, max_size=8))
def test_no_shown_interval_contradicts_its_cells_decision(cells):
    found = [cell_of(PREFILL, change, se, cell_id=f"c{i}") for i, (change, se) in enumerate(cells)]
    settle(found, ALPHA)
    for c in found:
        low, high = c.shown_bounds
        beyond = high < -PREFILL.max_regression_pct
        assert beyond == (c.decision == "fail"), c.text()
        assert (low > -PREFILL.max_regression_pct) == (c.decision == "pass"), c.text()


def comparison(concurrency, change, low, high, decision, better=False):
    return Comparison(metric="aggregate_tok_s", cell_id=f"decode-prose-c{concurrency}", category="prose",
                      concurrency=concurrency, prompt_tokens=None, value=1.0, baseline=1.0, runs=3, baseline_runs=3,
                      change_pct=change, change_low_pct=low, change_high_pct=high, limit_pct=7, decision=decision,
                      ok=decision == "pass", better=better)


def entrants():
    return [
        Entrant("baseline", "accepted", [], ["baseline of the study"], ["b1", "b2"], is_baseline=True),
        Entrant("steady", "accepted", [comparison(1, 1.0, -2.0, 4.0, "pass"), comparison(4, 0.5, -3.0, 4.0, "pass")],
                run_ids=["s1"], note="more slots"),
        Entrant("quick", "accepted", [comparison(1, 12.0, 8.0, 16.0, "pass", better=True),
                                      comparison(4, -2.0, -5.0, 1.0, "pass")], run_ids=["q1"]),
        Entrant("ngram", "rejected", [comparison(1, 40.0, 30.0, 50.0, "pass", better=True),
                                      comparison(4, -20.0, -25.0, -15.0, "fail")], run_ids=["n1"],
                note="n-gram lookup drafting"),
        Entrant("unsure", "inconclusive", [comparison(1, -5.0, -9.0, -1.0, "straddle")], run_ids=["u1"]),
        Entrant("broken", "failed", [], ["bad_flag: error: invalid argument"], ["x1"]),
        Entrant("never", "missing"),
    ]


def test_the_best_accepted_candidate_is_recommended_with_its_gains_and_every_candidate_is_ranked():
    found = answer("demo", "Which drafter?", "baseline", entrants())
    assert found.headline() == "Recommended: quick"
    why = " ".join(found.why())
    assert "better beyond the noise: aggregate decode, prose at 1 request: +12.0%" in why
    assert "first of 2 accepted" in why
    assert [s.name for s in found.standings] == ["baseline", "quick", "steady", "unsure", "ngram", "broken", "never"]
    assert [s.rank for s in found.standings] == [None, 1, 2, 3, 4, 5, 6]
    ngram = next(s for s in found.standings if s.name == "ngram")
    assert ngram.reason().startswith("rejected: aggregate decode, prose at 4 requests: -20.0%")
    assert "better beyond the noise: aggregate decode, prose at 1 request: +40.0% [+30.0, +50.0], better" in ngram.reason()
    assert "bad_flag" in next(s for s in found.standings if s.name == "broken").reason()


def test_without_an_accepted_candidate_the_baseline_stays_and_the_gains_are_still_named():
    found = answer("demo", None, "baseline", [e for e in entrants() if e.name not in ("steady", "quick")])
    assert found.recommended.name == "baseline"
    assert found.headline() == "Recommended: baseline, as no candidate is accepted"
    why = found.why()
    assert why[0].startswith("no candidate is accepted (1 inconclusive, 1 rejected, 1 failed, 1 missing)")
    assert any(line.startswith("closest: unsure") and "undecided" in line for line in why)
    assert any("ngram (rejected) is better beyond the noise" in line for line in why)
    unsound = [Entrant("baseline", "rejected", [], ["run b1: decode-prose-c1 invalid"], ["b1"], is_baseline=True)]
    assert answer("demo", None, "baseline", unsound).recommended is None


STUDY = """
name: answer-study
description: Which slot count?
base: {model: {path: "tiny:target"}, knobs: {chunk_size: 256}}
variants:
  - {name: quick, set: {knobs.chunk_size: 128}, note: a smaller chunk}
  - {name: ngram, set: {knobs.chunk_size: 64}, note: drafting}
plan: {decode: {concurrency: [1, 4], categories: [prose]}, prefill: null}
verdict: {rules: [{metric: aggregate_tok_s, concurrency: [1, 4], max_regression_pct: 7}]}
"""


@pytest.fixture
def judged(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(STUDY)
    study = load_study(path)
    assert [e.note for e in study.expand()] == [None, "a smaller chunk", "drafting"]
    verdicts = {"baseline": Verdict("accepted", ["baseline of the study"]),
                "quick": Verdict("accepted", ["within limits"], [comparison(1, 12.0, 8.0, 16.0, "pass", True)]),
                "ngram": Verdict("rejected", ["..."], [comparison(4, -20.0, -25.0, -15.0, "fail")])}
    return study, [Judged(e, [SimpleNamespace(run_id=f"run-{e.name}")], verdicts[e.name])  # type: ignore[list-item]
                   for e in study.expand()]


def test_report_ci_markdown_and_site_carry_the_same_answer(judged):
    study, items = judged
    found = study_answer(study, items)
    assert found.question == "Which slot count?" and found.headline() == "Recommended: quick"
    report = StudyReport(found)
    text = str(report)
    assert "Question: Which slot count?" in text and "a smaller chunk" in text and "Recommended: quick" in text
    assert "text/html" in report._repr_mimebundle_() and "Recommended: quick" in report._repr_html_()
    ci = as_markdown.write(report_of_judged(study, items, gate(items, parse_fail_on(None))))
    assert answer_markdown(found) in ci
    # the site rebuilds the answer from the recorded events: the same headline, reasons and ranking
    summaries = [RunSummary(label=i.entry.name, status="completed", run_id=f"run-{i.entry.name}",
                            verdicts=[{**i.verdict.to_event(question=study.description, note=i.entry.note),
                                       "run_ids": [f"run-{i.entry.name}"]}]) for i in items]
    recorded = study_answer_of(study.name, summaries, {"baseline": "baseline"})
    assert answer_markdown(recorded) == answer_markdown(found)


def test_an_older_event_is_read_and_a_lone_beyond_limit_interval_is_marked_in_words():
    data = asdict(comparison(4, -35.0, -43.8, -24.8, "straddle"))
    old = {k: v for k, v in data.items() if k not in ("holm_cells", "holm_level", "decision_low_pct",
                                                      "decision_high_pct", "log_se", "df")}
    text = comparison_from({**old, "added_later": 1}).text()
    assert "[-43.8, -24.8]" in text and "beyond it at this cell alone, not with the cells tested together (Holm)" in text


def test_runs_a_verdict_compared_carry_it():
    summaries = [RunSummary(run_id="r1", status="completed"), RunSummary(run_id="r2", status="completed"),
                 RunSummary(run_id="r3", status="completed", verdict="inconclusive",
                            verdicts=[{"judged_at": "1", "outcome": "rejected", "run_ids": ["r1", "r3"]},
                                      {"judged_at": "2", "outcome": "inconclusive", "run_ids": ["r1", "r2", "r3"]}]),
                 RunSummary(run_id="r4", status="completed")]
    covering_verdicts(summaries)
    assert [(s.verdict, s.judged_on) for s in summaries] == [
        ("inconclusive", "r3"), ("inconclusive", "r3"), ("inconclusive", None), (None, None)]


def test_a_gain_beyond_the_noise_is_named_in_the_verdict_whatever_its_outcome():
    import pandas as pd

    from servebook.config import VerdictRules
    from servebook.journal import Manifest
    from servebook.verdicts import judge_runs

    def run(c1, c4, wobble):
        return pd.DataFrame([{"cell_id": f"decode-prose-c{c}", "kind": "decode", "category": "prose", "concurrency": c,
                              "target_prompt_tokens": None, "aggregate_tok_s": v * wobble, "valid": True,
                              "invalid_reasons": "", "reconciliation": "ok"} for c, v in ((1, c1), (4, c4))])

    wobbles = (0.99, 1.0, 1.01)
    rules = VerdictRules(rules=[DECODE])
    verdict = judge_runs([(Manifest(status="completed"), run(140.0, 160.0, w)) for w in wobbles],
                         [run(100.0, 200.0, w) for w in reversed(wobbles)], rules, is_baseline=False)
    assert verdict.outcome == "rejected"  # -20% at 4 requests
    gain = next(r for r in verdict.reasons if r.startswith("better beyond the noise:"))
    assert "aggregate decode, prose at 1 request: +40.0%" in gain
