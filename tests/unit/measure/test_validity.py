"""Cell faults are codes; the text beside them is for readers and can be reworded without changing a decision."""

import pandas as pd
import pytest

from servebook.config import ComparisonRule, VerdictRules
from servebook.journal import Manifest
from servebook.measure import validity
from servebook.measure.cells import CellSpec, cell_figures, evidence, summarize_cell, with_validity
from servebook.measure.client import RequestRecord
from servebook.measure.reconcile import Check, Reconciliation
from servebook.measure.validity import INVALID_CODES, MESSAGES, cell_faults, codes_of, only_disturbed
from servebook.verdicts import judge_runs

OK = Reconciliation("ok", [Check("generated tokens", 10, 10)])
SPEC = CellSpec("decode-prose-c4", "decode", "prose", 4, 4, 10)


def record(i, completion=10, error=None):
    return RequestRecord(f"r{i}", SPEC.cell_id, 4, "prose", 10, t_send=0.0, t_first=0.1, t_last=1.0,
                         prompt_tokens=100, completion_tokens=None if error else completion, cached_tokens=0,
                         error=error)


def cell_row(value, *, cpu=None, gpu_pids=None, compiled=(), completion=10):
    """One recorded decode cell, its validity decided by `cell_faults` from host evidence."""
    records = [record(i, completion=completion) for i in range(4)]
    faults = cell_faults(evidence(SPEC, records, OK, compilations=list(compiled), foreign_cpu_cores=cpu,
                                  foreign_cpu_limit=0.5, gpu_foreign_pids=gpu_pids))
    row = dict(with_validity(cell_figures(SPEC, records), OK, faults))
    row["aggregate_tok_s"] = value
    return row


def runs(values, **disturbance):
    """Runs of one decode cell; the last run carries `disturbance`."""
    frames = [pd.DataFrame([cell_row(v)]) for v in values[:-1]]
    return frames + [pd.DataFrame([cell_row(values[-1], **disturbance)])]


RULES = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[4], category="prose",
                                           max_regression_pct=7)])


def verdicts_for_study():
    baseline = [pd.DataFrame([cell_row(v)]) for v in (200, 198, 202, 201)]
    cases = {
        "host busy": runs([199, 201, 200, 40], cpu=1.7),
        "gpu busy": runs([199, 201, 200, 40], gpu_pids="777"),
        "both": runs([199, 201, 200, 40], cpu=1.2, gpu_pids="778"),
        "compiled": runs([199, 201, 200, 40], compiled=["compiling graph for batch 4"]),
        "wrong length": runs([199, 201, 200, 200], completion=9),
        "clean loss": runs([150, 152, 149, 151]),
    }
    out = {}
    for name, frames in cases.items():
        judged = [(Manifest(status="completed", run_id=f"r{i}"), c) for i, c in enumerate(frames)]
        verdict = judge_runs(judged, baseline, RULES, is_baseline=False)
        out[name] = (verdict.outcome, verdict.settled, [c.runs for c in verdict.comparisons])
    return out


def test_every_code_has_a_message_and_messages_name_no_unknown_code():
    assert set(MESSAGES) == set(INVALID_CODES) - {"unclassified"}


def test_disturbances_leave_the_statistics_other_faults_reject():
    found = verdicts_for_study()
    for name in ("host busy", "gpu busy", "both"):
        outcome, _, runs_compared = found[name]
        assert outcome != "rejected" and runs_compared == [3], name
    assert found["compiled"][0] == "rejected" and found["wrong length"][0] == "rejected"
    assert found["clean loss"][0] == "rejected"


def test_rewording_every_fault_message_changes_no_verdict(monkeypatch):
    before = verdicts_for_study()
    reworded = {code: "REWORDED " + code.upper() + " " + "|".join(f"{{{k}}}" for k in _fields(text))
                for code, text in MESSAGES.items()}
    monkeypatch.setattr(validity, "MESSAGES", reworded)
    sample = cell_row(40, cpu=1.7, gpu_pids="777")
    assert sample["invalid_reasons"].startswith("REWORDED"), "the rewording reached the recorded text"
    assert verdicts_for_study() == before


def _fields(template):
    import string

    return [name.split(":")[0] for _, name, _, _ in string.Formatter().parse(template) if name]


def test_codes_are_recorded_beside_the_text():
    row = cell_row(40, cpu=1.7, gpu_pids="777")
    assert row["invalid_codes"] == "host_busy,gpu_busy" and not row["valid"]
    assert row["invalid_reasons"].count("; ") == 1
    clean = summarize_cell(SPEC, [record(i) for i in range(4)], OK)
    assert clean["valid"] and clean["invalid_codes"] == "" and clean["invalid_reasons"] == ""


@pytest.mark.parametrize("text, codes", [
    ("host busy: other processes used 1.70 CPU cores during the cell (limit 0.5)", ["host_busy"]),
    ("host busy: x; gpu busy: other processes (1) on the engine's GPU during the cell", ["host_busy", "gpu_busy"]),
    ("2 of 8 requests failed (boom); counters disagree: prompt tokens", ["requests_failed", "counters_disagree"]),
    ("3 requests returned [9] tokens instead of 10", ["wrong_length"]),
    ("cold not verified: neither", ["cold_not_verified"]),
    ("something a future servebook wrote", ["unclassified"]),
    ("", []),
])
def test_journals_written_before_codes_are_read_from_their_text(text, codes):
    assert codes_of(None, text) == codes
    assert codes_of(float("nan"), text) == codes  # a column missing in some runs reads back as NaN


def test_only_disturbances_are_disturbed():
    assert only_disturbed(["host_busy", "gpu_busy"])
    assert not only_disturbed(["host_busy", "unclassified"]) and not only_disturbed([])
