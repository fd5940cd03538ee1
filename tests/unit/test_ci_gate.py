"""The CI gate's logic: which outcomes fail a job and with which code, the cell that decided a verdict, the
machine-readable outputs, steps in a run history, journal slices and baselines taken from the journal."""

import json
import textwrap
from datetime import datetime, timezone
from types import SimpleNamespace

import numpy as np
import pytest
from junitparser import JUnitXml

from servebook.config import InputError, VerdictRules, load_study
from servebook.config.rules import RecordedBaseline
from servebook.config.slices import JournalSlice, parse_slice
from servebook.estimates.changes import find_steps
from servebook.journal import Journal
from servebook.journal.synthetic import write_synthetic_run
from servebook.present.outputs import as_json, as_junit, as_markdown, report_of_judged
from servebook.verdicts import (
    GATE_EXIT_CODES,
    Comparison,
    Judged,
    Verdict,
    deciding,
    gate,
    history,
    parse_fail_on,
)
from servebook.verdicts.recorded import recorded_baseline

STUDY = """
name: gate-study
base: {model: {path: "tiny:target"}, knobs: {chunk_size: 256}}
variants:
  - {name: slower, set: {knobs.chunk_size: 128}}
  - {name: broken, set: {knobs.chunk_size: 64}}
  - {name: unsure, set: {knobs.chunk_size: 512}}
  - {name: never, set: {knobs.chunk_size: 32}}
plan: {decode: {concurrency: [1, 4], categories: [prose]}, prefill: null}
verdict: {rules: [{metric: aggregate_tok_s, concurrency: [1, 4], max_regression_pct: 5}]}
"""


def cell(concurrency, change, low, high, decision, ok):
    return Comparison(metric="aggregate_tok_s", cell_id=f"decode-prose-c{concurrency}", category="prose",
                      concurrency=concurrency, prompt_tokens=None, value=90.0, baseline=100.0, runs=3,
                      baseline_runs=3, change_pct=change, change_low_pct=low, change_high_pct=high, limit_pct=5,
                      decision=decision, ok=ok, method="variance pooled over 5 candidates and 15 runs")


@pytest.fixture
def study(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(STUDY)
    return load_study(path)


@pytest.fixture
def judged(study):
    entries = {e.name: e for e in study.expand()}
    verdicts = {
        "baseline": Verdict("accepted", ["baseline of the study"]),
        "slower": Verdict("rejected", ["aggregate decode ..."], [cell(1, -2.0, -3.0, -1.0, "pass", True),
                                                                 cell(4, -9.5, -12.0, -7.1, "fail", False)]),
        "broken": Verdict("failed", ["bad_flag: error: invalid argument"]),
        "unsure": Verdict("inconclusive", ["inconclusive: ..."], [cell(1, -4.0, -7.5, -0.4, "straddle", False),
                                                                  cell(4, -1.0, -2.0, 0.0, "pass", True)]),
    }
    return [Judged(entry, [] if name == "never" else [SimpleNamespace(run_id=f"run-{name}")],  # type: ignore[list-item]
                   verdicts.get(name)) for name, entry in entries.items()]


def test_fail_on_names_an_unknown_outcome():
    assert parse_fail_on("rejected, failed") == {"rejected", "failed"}
    assert parse_fail_on(None) == frozenset()
    with pytest.raises(InputError, match="rejectd"):
        parse_fail_on("rejectd")


@pytest.mark.parametrize("given", ["", " ", ",", " , "])
def test_a_fail_on_that_names_no_outcome_is_refused_not_a_gate_turned_off(given):
    """Issue 56, item 12: `--fail-on ""` (a CI variable left empty) turned the gate off without a word."""
    with pytest.raises(InputError, match=r"--fail-on .*: names no outcome, so nothing would fail the job"):
        parse_fail_on(given)
    with pytest.raises(InputError, match=r"^fail_on '': names no outcome"):
        parse_fail_on("", "fail_on")


@pytest.mark.parametrize("fail_on, code", [(None, 0), ("inconclusive", 12), ("failed,inconclusive", 11),
                                           ("rejected,failed,inconclusive,missing", 10), ("missing", 13)])
def test_the_exit_code_is_that_of_the_first_failing_outcome_in_precedence(judged, fail_on, code):
    result = gate(judged, parse_fail_on(fail_on))
    assert result.exit_code == code and result.passed == (code == 0)
    assert set(GATE_EXIT_CODES.values()).isdisjoint({0, 1, 2, 3, 4, 130})


def test_the_deciding_cell_is_the_one_furthest_beyond_or_nearest_to_failing(judged):
    verdicts = {j.entry.name: j.verdict for j in judged}
    assert deciding(verdicts["slower"]).concurrency == 4
    assert deciding(verdicts["unsure"]).concurrency == 1
    assert deciding(verdicts["broken"]) is None


def test_markdown_json_and_junit_carry_the_deciding_cell_and_the_gate(study, judged):
    result = gate(judged, parse_fail_on("rejected,failed"))
    markdown = as_markdown.write(report_of_judged(study, judged, result), site_url="https://perf.example.org/")
    assert "gate failed (exit 10): rejected: slower; failed: broken" in markdown
    # the answer's ranking is the one table of verdicts: the candidate linked, the outcome the gate fails on bold
    assert "| 2 | [slower](https://perf.example.org/runs/run-slower.html) | **rejected** | 1 | -5.8% | aggregate " \
        "decode, prose at 4 requests: -9.5% [-12.0, -7.1], beyond its limit |" in markdown
    assert "| 3 | [broken](https://perf.example.org/runs/run-broken.html) | **failed** | 1 | - | bad_flag: error: " \
        "invalid argument |" in markdown and "| 4 | never | missing | 0 | - | never run |" in markdown
    assert "#### Verdicts" not in markdown
    assert "](https://perf.example.org/studies/gate-study.html)" in markdown
    data = json.loads(json.dumps(as_json.data(report_of_judged(study, judged, result)), default=str))
    by_name = {c["name"]: c for c in data["candidates"]}
    assert data["gate"]["exit_code"] == 10 and by_name["never"]["outcome"] == "missing"
    assert by_name["slower"]["deciding_cell"]["change_high_pct"] == -7.1
    xml = JUnitXml.fromstring(as_junit.write(report_of_judged(study, judged, result)))
    cases = {(case.classname, case.name): case for suite in xml for case in suite}
    assert cases[("gate-study.slower", "aggregate_tok_s prose at 4 requests")].result[0].type == "beyond_limit"
    assert not cases[("gate-study.slower", "aggregate_tok_s prose at 1 request")].result
    assert cases[("gate-study.broken", "verdict")].result[0].type == "failed"
    # an undecided cell is skipped unless the gate fails on inconclusive verdicts
    assert cases[("gate-study.unsure", "aggregate_tok_s prose at 1 request")].result[0]._tag == "skipped"


def series(rng, levels):
    return [level * float(np.exp(rng.normal(0, 0.02))) for level, n in levels for _ in range(n)]


def test_a_step_is_found_where_it_happened_with_its_change_and_interval():
    rng = np.random.default_rng(7)
    [step] = find_steps(series(rng, [(100, 15), (90, 6)]))
    assert abs(step.index - 15) <= 1 and step.low_pct < step.change_pct < step.high_pct
    assert -13 < step.change_pct < -7 and step.high_pct < 0


def test_a_flat_series_and_a_short_one_have_no_step():
    rng = np.random.default_rng(3)
    assert find_steps(series(rng, [(100, 60)])) == []
    assert find_steps([100.0, 80.0, 100.0]) == []


def test_a_slice_is_parsed_with_its_fields_checked():
    assert parse_slice("candidate=baseline, engine_version=1.1").engine_version == "1.1"
    with pytest.raises(InputError, match="engine_versio"):
        parse_slice("engine_versio=1.1")
    with pytest.raises(InputError, match="key=value"):
        parse_slice("baseline")


def _journal_with_history(tmp_path):
    journal = Journal(tmp_path / "journal")
    for i in range(12):
        version, speed = ("1.0", 1.0) if i < 7 else ("1.1", 0.85)
        write_synthetic_run(journal, index=i, label="base", study="qualify", speed=speed, chunk_size=256,
                            started_at=f"2026-11-{10 + i:02d}T00:00:00Z",
                            environment={"engine_version": version, "machine_id": "m1"},
                            verdict="accepted" if i == 6 else None)
    return journal


def test_history_marks_the_engine_change_and_finds_the_step_there(tmp_path):
    found = history(_journal_with_history(tmp_path), "base")
    assert found.runs == 12 and found.machine == "m1"
    line = next(s for s in found.series if s.cell_id == "decode-prose-c1")
    assert line.changes_of_setup() == [(7, "engine version 1.0 -> 1.1")]
    [step] = line.steps
    assert step.index == 7 and -18 < step.change_pct < -12
    assert JournalSlice(candidate="base", engine_version="1.1", since="2026-11-18").select(
        _journal_with_history(tmp_path / "again").index())["run_id"].size == 4


def test_a_recorded_baseline_is_the_accepted_runs_here_and_refused_when_stale_or_foreign(tmp_path):
    journal = _journal_with_history(tmp_path)
    plan_id = journal.index()["plan_id"].iloc[0]
    spec = RecordedBaseline(candidate="base", engine_version="1.0")
    now = datetime(2026, 11, 30, tzinfo=timezone.utc)
    chosen = recorded_baseline(journal, spec, plan_id, "m1", exclude=set(), now=now)
    assert len(chosen.records) == 1 and chosen.engine_versions == ["1.0"]  # the one run a verdict accepted
    assert len(recorded_baseline(journal, spec.model_copy(update={"accepted_only": False}), plan_id, "m1", set(),
                                 now=now).records) == 7
    with pytest.raises(InputError, match="other machines"):
        recorded_baseline(journal, spec, plan_id, "m2", set(), now=now)
    with pytest.raises(InputError, match="days old"):
        recorded_baseline(journal, spec, plan_id, "m1", set(), now=datetime(2027, 3, 1, tzinfo=timezone.utc))
    with pytest.raises(InputError, match="no verdict accepted"):
        recorded_baseline(journal, RecordedBaseline(candidate="base", engine_version="1.1"), plan_id, "m1", set(),
                          now=now)


def test_a_study_takes_a_baseline_or_recorded_runs_and_its_base_can_be_set(tmp_path):
    with pytest.raises(ValueError, match="not both"):
        VerdictRules(baseline="other", baseline_from=RecordedBaseline(candidate="x"))
    dumped = VerdictRules(baseline_from=RecordedBaseline(candidate="x")).model_dump()
    assert VerdictRules.model_validate(dumped).baseline_entry is None
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(STUDY))
    study = load_study(path, {"pins.engine_version": "b4600"})
    assert {e.candidate.pins.engine_version for e in study.expand()} == {"b4600"}
    with pytest.raises(InputError, match="engine_versio"):
        load_study(path, {"pins.engine_versio": "b4600"})
