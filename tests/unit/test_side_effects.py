"""A recommendation with its side effects (issue 55, item 1): every change beyond the noise in a figure no rule
judges is listed beside the verdict, worse ones first, by the verdict's own estimate; a percentile from too few
samples is marked; a study may judge such a figure as a guard, which rejects or leaves undecided but never gains."""

import json
import shutil
from pathlib import Path

import pandas as pd

from servebook.config import ComparisonRule, VerdictRules, load_study
from servebook.journal import Journal, Manifest, samples
from servebook.present.report import study_report
from servebook.verdicts import judge_runs
from servebook.verdicts.ranking import Entrant, answer
from servebook.verdicts.side_effects import side_effect_from, side_effects

ROOT = Path(__file__).parents[2]
RULES = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[4], max_regression_pct=10)])
DONE = Manifest(status="completed")


def run(rate: float, itl_p99_s: float, ttft_s: float = 0.05, gaps: int | None = None, round_: int = 0) -> pd.DataFrame:
    row = {"cell_id": "decode-prose-c4", "kind": "decode", "category": "prose", "concurrency": 4,
           "target_prompt_tokens": None, "aggregate_tok_s": rate, "itl_p99_s": itl_p99_s, "ttft_s": ttft_s,
           "valid": True, "invalid_reasons": "", "reconciliation": "ok"}
    if gaps is not None:
        row["itl_n"] = gaps
    frame = pd.DataFrame([row])
    frame.attrs["block"] = ("m", str(round_))
    return frame


def sides(itl_factor: float, gaps: int | None = None, ttft_factor: float = 1.0):
    baseline = [run(100 * f, 0.020 * f, 0.05 * f, gaps, i) for i, f in enumerate((1.0, 1.02, 0.98))]
    mine = [run(130 * f, 0.020 * itl_factor * f, 0.05 * ttft_factor * f, gaps, i)
            for i, f in enumerate((1.0, 0.99, 1.01))]
    return mine, baseline


def test_a_doubled_itl_p99_is_a_worse_side_effect_and_the_judged_figure_is_not_listed():
    mine, baseline = sides(itl_factor=2.2, ttft_factor=0.7)
    found = side_effects(mine, baseline, RULES)
    assert [(e.column, e.worse) for e in found] == [("itl_p99_s", True), ("ttft_s", False)]  # worse first
    itl = found[0]
    assert itl.text().startswith("ITL p99, prose at 4 requests: x2.2 [")
    assert itl.low_pct > 0 and itl.by == "interval" and itl.tail is None
    verdict = judge_runs([(DONE, cells) for cells in mine], baseline, RULES, is_baseline=False)
    assert verdict.outcome == "accepted"
    assert [e.column for e in verdict.side_effects] == ["itl_p99_s", "ttft_s"]
    # recorded with the verdict, and read back as the site reads it
    event = json.loads(json.dumps(verdict.to_event()))
    assert [side_effect_from(e).text() for e in event["side_effects"]] == [e.text() for e in verdict.side_effects]


def test_a_change_within_the_noise_is_no_side_effect():
    mine, baseline = sides(itl_factor=1.005)
    assert side_effects(mine, baseline, RULES) == []
    verdict = judge_runs([(DONE, cells) for cells in mine], baseline, RULES, is_baseline=False)
    assert "side_effects" not in verdict.to_event()  # events without side effects keep their shape


def test_a_thin_tail_is_listed_marked_insufficient():
    mine, baseline = sides(itl_factor=2.2, gaps=40)
    [itl] = [e for e in side_effects(mine, baseline, RULES) if e.column == "itl_p99_s"]
    assert (itl.tail_samples, itl.tail_needed) == (40, 662)
    assert itl.text().endswith("insufficient (n=40)")


def test_without_an_interval_every_run_must_lie_beyond_every_run():
    beyond = side_effects([run(100, 0.044)], [run(100, 0.020)], RULES)
    assert [e.column for e in beyond] == ["itl_p99_s"] and beyond[0].by == "runs"
    assert "every one of 1 runs beyond every one of the baseline's 1" in beyond[0].text()
    overlapping = [run(100, 0.020, round_=0), run(100, 0.050, round_=1)]
    assert [e.column for e in side_effects([run(100, 0.030)], overlapping, RULES)
            if e.column == "itl_p99_s"] == []


def test_the_answer_names_side_effects_beside_the_recommendation_worse_first():
    mine, baseline = sides(itl_factor=2.2, ttft_factor=0.7)
    verdict = judge_runs([(DONE, cells) for cells in mine], baseline, RULES, is_baseline=False)
    entrant = Entrant("ngram", verdict.outcome, verdict.comparisons, verdict.reasons,
                      side_effects=verdict.side_effects)
    found = answer("s", None, "baseline", [Entrant("baseline", "accepted", is_baseline=True), entrant])
    assert found.recommended is not None and found.recommended.name == "ngram"
    [but] = [line for line in found.why() if line.startswith("but worse")]
    assert "ITL p99, prose at 4 requests: x2.2" in but
    [said] = found.side_effects()
    assert said.startswith("ngram (accepted): worse beyond the noise: ITL p99") and said.endswith("; 1 better")


def test_a_guard_rejects_but_never_gains_and_leaves_the_rules_hash_of_studies_without_guards():
    guarded = VerdictRules(rules=RULES.rules, guards=[ComparisonRule(metric="itl_p99_s", concurrency=[4],
                                                                      max_regression_pct=20)])
    mine, baseline = sides(itl_factor=2.2, ttft_factor=0.7)
    verdict = judge_runs([(DONE, cells) for cells in mine], baseline, guarded, is_baseline=False)
    assert verdict.outcome == "rejected"
    [guard] = [c for c in verdict.comparisons if c.guard]
    assert guard.decision == "fail" and guard.text().startswith("guard ITL p99, prose at 4 requests")
    assert [e.column for e in verdict.side_effects] == ["ttft_s"]  # the guard's figure is judged, not a side effect
    better = judge_runs([(DONE, cells) for cells in sides(itl_factor=0.5)[0]], baseline, guarded, is_baseline=False)
    assert better.outcome == "accepted" and not any(c.better for c in better.comparisons if c.guard)
    assert guarded.hash != RULES.hash
    # the committed study declares no guards: its rules hash is the one its recorded verdicts carry
    study = load_study(ROOT / "data" / "studies" / "h200-vllm-1b.yaml")
    assert (study.verdict.hash, study.rules_hash) == ("58868c2f9d53", "839bfd750883")  # as on main before guards


def test_the_committed_journal_names_ngrams_worse_latency_percentile(tmp_path):
    shutil.copytree(samples.sample_journal("sample-journal-vllm"), tmp_path / "journal")
    report = study_report(ROOT / "data" / "studies" / "h200-vllm-1b.yaml", Journal(tmp_path / "journal"))
    [ngram] = [line for line in report.answer.side_effects() if line.startswith("ngram ")]
    assert ngram.startswith("ngram (rejected): worse beyond the noise: TPOT p50, reuse: x")
    assert "TPOT p50, prose at 16 requests: x" in ngram
    assert "side effects: changes beyond the noise" in report.markdown() and ngram in report.markdown()


def test_judge_text_labels_the_baseline_baseline_and_names_worse_side_effects():
    from servebook.config.study import StudyEntry
    from servebook.verdicts.judge import Judged, Judgement, Verdict

    mine, baseline = sides(itl_factor=2.2)
    verdict = judge_runs([(DONE, cells) for cells in mine], baseline, RULES, is_baseline=False)
    study = load_study(ROOT / "data" / "studies" / "h200-vllm-1b.yaml")
    entries = {e.name: e for e in study.expand()}
    shown = Judgement([Judged(entries["baseline"], [object()], Verdict("accepted", ["baseline of the study"])),
                       Judged(StudyEntry("ngram", entries["ngram"].candidate, {}), [object()], verdict)],
                      "baseline")
    [table] = shown.blocks()
    rows = {row.values[0]: row.values for row in table.rows}
    assert rows["baseline"][2] == "baseline" and rows["ngram"][2] == "accepted"
    assert "worse beyond the noise where no rule looks: ITL p99, prose at 4 requests: x2.2" in rows["ngram"][3]
