"""A cell disturbed only by the host is measured again; a fault of the engine's own is recorded at once."""

from __future__ import annotations

import asyncio

from servebook.config.plan import Plan
from servebook.measure.cells import plan_cells
from servebook.measure.log import CellOutcome, MeasurementLog
from servebook.measure.loop import _measure_cell
from servebook.util.progress import Reporter


class ScriptedMeasurement:
    """Answers run_cell with the next scripted fault codes, as Measurement.run_cell records its outcome."""

    def __init__(self, plan: Plan, script: list[str]):
        self.plan, self.script, self.log, self.calls = plan, list(script), MeasurementLog(), 0

    async def run_cell(self, spec, on_done=lambda: None) -> CellOutcome:
        self.calls += 1
        codes = self.script.pop(0)
        summary = {"cell_id": spec.cell_id, "valid": not codes, "invalid_codes": codes,
                   "invalid_reasons": f"attempt {self.calls}: {codes}" if codes else ""}
        outcome = CellOutcome(spec, [], None, None, summary)  # type: ignore[arg-type]
        self.log.outcomes.append(outcome)
        self.log.telemetry.append({"cell_id": spec.cell_id, "attempt": self.calls})
        return outcome


def measure(script: list[str], **plan_fields) -> tuple[ScriptedMeasurement, CellOutcome, list[str]]:
    plan = Plan.model_validate({"prefill": None, **plan_fields})
    spec = plan_cells(plan)[0]
    m = ScriptedMeasurement(plan, script)
    lines: list[str] = []
    reporter = Reporter(quiet=True)
    reporter.log = lines.append  # type: ignore[method-assign]
    with reporter.task("measure", total=spec.n_requests) as task:
        outcome = asyncio.run(_measure_cell(m, spec, task, reporter))  # type: ignore[arg-type]
    return m, outcome, lines


def test_a_cell_the_client_stalled_in_is_measured_again_and_the_discarded_attempt_is_said():
    m, outcome, lines = measure(["client_stall", ""])
    assert m.calls == 2 and outcome.summary["valid"]
    assert m.log.outcomes == [outcome]
    assert m.log.telemetry == [{"cell_id": outcome.spec.cell_id, "attempt": 2}]
    assert m.log.remeasured == {outcome.spec.cell_id: ["attempt 1: client_stall"]}
    assert any("measuring it again" in line for line in lines)


def test_an_engine_fault_is_recorded_at_once():
    m, outcome, _ = measure(["counters_disagree", ""])
    assert m.calls == 1 and not outcome.summary["valid"] and m.log.remeasured == {}


def test_a_fault_of_the_engine_beside_a_disturbance_is_recorded_at_once():
    m, _, _ = measure(["client_stall,compilation", ""])
    assert m.calls == 1


def test_attempts_are_bounded_and_the_last_disturbed_one_is_recorded():
    m, outcome, _ = measure(["host_busy", "host_busy", "host_busy"], remeasure_disturbed=2)
    assert m.calls == 3 and not outcome.summary["valid"]
    assert len(m.log.outcomes) == 1 and len(m.log.remeasured[outcome.spec.cell_id]) == 2


def test_no_remeasuring_when_the_plan_says_so():
    m, outcome, _ = measure(["client_lag", ""], remeasure_disturbed=0)
    assert m.calls == 1 and not outcome.summary["valid"]
