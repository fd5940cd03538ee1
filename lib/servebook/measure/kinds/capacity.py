"""Capacity: a derived kind. Its one row per run is read from open-loop probes (load cells) that a search chooses
one after another (measure/capacity.py): the highest request rate at which the plan's objectives hold."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from ...config.plan import Plan
from ..capacity import Probe, capacity_row, describe_capacity, search, stalls_cannot_flip
from ..openloop import meets, probe_window, schedule
from ..validity import stalled_requests
from .base import CellSpec, KindBase
from .registry import cell_line, label, register

if TYPE_CHECKING:
    from ...util.progress import Reporter
    from ..cells import CellSummary
    from ..log import MeasurementLog
    from ..loop import Measurement
    from ..turns import NoTurns, Turns


class Capacity(KindBase):
    name = "capacity"
    order = 60
    derived = True

    def derives(self, plan: Plan) -> bool:
        return plan.capacity is not None

    async def derive(self, measurement: "Measurement", plan: Plan, log: "MeasurementLog", reporter: "Reporter",
                     on_cell: Callable[[], None], turns: "Turns | NoTurns") -> None:
        """Open-loop probes chosen one after another (measure.capacity), each a recorded cell; then the row."""
        assert plan.capacity is not None and plan.load is not None and plan.slo is not None  # the plan checked it
        search_spec, slo, load = plan.capacity, plan.slo, plan.load
        base_window = search_spec.probe_s or load.duration_s
        rows: list[dict] = []

        async def probe(rate: float, requests: int) -> Probe:
            window = probe_window(load, rate, base_window, requests)
            n = len(schedule(load.model_copy(update={"duration_s": window}), rate))
            spec = CellSpec(f"capacity-{rate:.4g}rps", "load", "prose", 0, n, load.output_tokens.mean,
                            load.prompt_tokens.mean, rate=rate, window_s=window)
            with reporter.task(f"capacity probe at {rate:.4g} requests/s", total=n, unit="requests") as task:
                async with turns.step():
                    outcome = await measurement.run_cell(spec, on_done=task.advance)
                    on_cell()
            s = outcome.summary
            rows.append(dict(s))
            reporter.log(f"  {label(spec)}: {cell_line(spec, s)}")
            codes = str(s.get("invalid_codes") or "").split(",")
            measured = [r for r in outcome.records if r.measured]
            stalled = {id(r) for r in stalled_requests(measured, spec.category)}
            bounded = codes == ["client_stall"] and stalls_cannot_flip([meets(r, slo) for r in measured],
                                                                       [id(r) in stalled for r in measured],
                                                                       slo.attainment)
            return Probe(rate, len(measured), s.get("slo_attainment"), s.get("slo_attainment_low"),
                         s.get("slo_attainment_high"), valid=bool(s["valid"]), client_limited="client_lag" in codes,
                         stall_bounded=bounded)

        probes = await search(probe, search_spec, slo.attainment)
        row = capacity_row(probes, rows, slo.attainment, search_spec.precision_pct)
        log.derived.append(cast("CellSummary", row))
        reporter.log(f"  capacity: {describe_capacity(row, slo.describe())}")
        on_cell()


register(Capacity())
