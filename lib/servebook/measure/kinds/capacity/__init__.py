"""Capacity: a derived kind. Its one row per run is read from open-loop probes (load cells) that a search chooses
one after another (measure/kinds/capacity/search.py): the highest request rate at which the plan's objectives hold."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from ....config.load import ServiceObjectives
from ....config.plan import Plan
from ...contract import CellRunner, CellSpec, Steps
from ...openloop import attainment, probe_window, schedule
from ...validity import stalled_requests
from ..base import KindBase
from ..registry import cell_line, label, register
from .search import Probe, capacity_row, describe_capacity, search

if TYPE_CHECKING:
    from ....util.progress import Reporter
    from ...transport.client import RequestRecord


class Capacity(KindBase):
    name = "capacity"
    order = 60
    derived = True

    def derives(self, plan: Plan) -> bool:
        return plan.capacity is not None

    async def derive(self, runner: CellRunner, plan: Plan, reporter: Reporter, on_cell: Callable[[], None],
                     turns: Steps) -> list[dict[str, Any]]:
        """Open-loop probes chosen one after another (measure.kinds.capacity.search), each a recorded cell; then the row."""
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
                    outcome = await runner.run_cell(spec, on_done=task.advance)
                    on_cell()
            s = outcome.summary
            found = probe_of(rate, cast("dict[str, Any]", s), [r for r in outcome.records if r.measured], slo,
                             window)
            rows.append(dict(s))
            reporter.log(f"  {label(spec)}: {cell_line(spec, s)}")
            return found

        probes = await search(probe, search_spec, slo.attainment)
        row = capacity_row(probes, rows, slo.attainment, search_spec.precision_pct)
        reporter.log(f"  capacity: {describe_capacity(row, slo.describe())}")
        on_cell()
        return [row]


def probe_of(rate: float, row: dict[str, Any], measured: list["RequestRecord"], slo: ServiceObjectives,
             window_s: float | None) -> Probe:
    """A probe as the search reads it from its cell's row and measured requests. A probe disturbed by stalled reads
    alone (their tokens came in a burst, so their latency is in doubt) drops those requests, not the probe: its
    attainment is the other requests' and counts, and the row says so (its figures over them, and
    `slo_dropped_requests`), so it is never shown as having held on requests it did not count."""
    codes = [code for code in str(row.get("invalid_codes") or "").split(",") if code]
    if codes == ["client_stall"]:
        stalled = {id(r) for r in stalled_requests(measured, "prose")}
        kept = [r for r in measured if id(r) not in stalled]
        if stalled and kept:
            row.update(attainment(kept, slo, window_s), slo_dropped_requests=len(stalled))
            return Probe(rate, len(kept), row["slo_attainment"], row["slo_attainment_low"], row["slo_attainment_high"],
                         valid=False, stalls_dropped=len(stalled))
    return Probe(rate, len(measured), row.get("slo_attainment"), row.get("slo_attainment_low"),
                 row.get("slo_attainment_high"), valid=bool(row["valid"]), client_limited="client_lag" in codes)


register(Capacity())
