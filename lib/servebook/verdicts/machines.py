"""One cell's change machine by machine, where a study's runs come from several machines.

Machines are blocks of the study's model: a faster host lifts every candidate alike and is taken out. What a block
cannot take out is a candidate whose change itself differs between hosts: on the lent H200s a 2048-token prefill
chunk cost the 1B model a third of its 8K prefill rate on the slow hosts and 6.5% on the fast one, because the
knob's cost is the engine's CPU work per step (docs/findings/2026-12-03-two-kinds-of-lent-host.md). Pooled, such a
cell would report one average change that holds on no machine. So each machine's runs are also judged alone (with
the other candidates that ran there for the noise), and where one machine's runs put the cell within its limit and
another's beyond it, the cell's decision is `host`: the verdict depends on the machine, said with each machine's
figure, and more runs on these machines will not decide it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import pandas as pd

from ..estimates import ALPHA, Block, Decision, Spread, fit_contrasts

#: how many characters of a machine's key name it in a reason (its GPU's UUID or its host id, whichever leads)
_SHORT = 13


@dataclass
class MachineChange:
    """The candidate against the baseline on one machine's runs alone."""

    machine: str
    runs: int
    baseline_runs: int
    #: the baseline's mean there: how fast that host is, for the reader
    baseline: float | None
    change_pct: float | None
    change_low_pct: float | None
    change_high_pct: float | None
    #: pass (within the limit), fail (beyond it), straddle, single (one run a side) or missing
    decision: Decision
    #: the median of the cells' `cpu_probe_ms` there (a fixed 2 ms of Python timed before each cell): what tells the
    #: lent hosts' two kinds apart (0.74-0.79 ms on the fast one, 1.0-2.3 ms on the slow), None where not recorded
    cpu_probe_ms: float | None = None

    @property
    def label(self) -> str:
        """The machine named briefly: the part of its key that tells the study's machines apart."""
        gpu = self.machine.rsplit("/", 1)[-1]
        return (gpu[4:] if gpu.startswith("GPU-") else gpu)[:_SHORT] or "(unnamed)"

    def text(self) -> str:
        if self.change_pct is None:
            return f"no figure on {self.label}"
        bounds = (f" [{self.change_low_pct:+.1f}, {self.change_high_pct:+.1f}]"
                  if self.change_low_pct is not None and self.change_high_pct is not None else "")
        said = {"pass": "within the limit", "fail": "beyond it", "straddle": "undecided",
                "single": "one run a side"}.get(self.decision, self.decision)
        base = f", baseline {_figure(self.baseline)}" if self.baseline is not None else ""
        probe = f", CPU probe {self.cpu_probe_ms:.2f} ms" if self.cpu_probe_ms is not None else ""
        return (f"{self.change_pct:+.1f}%{bounds} on {self.label} ({self.runs} vs {self.baseline_runs} runs{base}"
                f"{probe}: {said})")


def _figure(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def machine_of(block: Block) -> str:
    return block[0] if block else ""


def machine_changes(groups: dict[str, list[tuple[Block, float]]], candidate: str, baseline: str, log_margin: float,
                    lower_is_better: bool, alpha: float = ALPHA) -> list[MachineChange]:
    """The candidate's change on each machine where both it and the baseline ran, when there are two such machines
    or more (none otherwise: one machine is what the pooled model already judged). `groups`: name -> (block, value)
    per run, as fit_contrasts takes them."""
    machines = sorted({machine_of(block) for block, _ in groups.get(candidate, [])}
                      & {machine_of(block) for block, _ in groups.get(baseline, [])} - {""})
    if len(machines) < 2:
        return []
    out = []
    for machine in machines:
        there = {name: [(b, v) for b, v in runs if machine_of(b) == machine] for name, runs in groups.items()}
        there = {name: runs for name, runs in there.items() if runs}
        contrast = fit_contrasts(there, baseline).get(candidate)
        mine, theirs = there[candidate], there[baseline]
        bounds = contrast.bounds_pct(alpha) if contrast is not None else None
        p = contrast.p_beyond(log_margin, worse_is_lower=not lower_is_better) if contrast is not None else None
        decision: Decision
        if contrast is None:
            decision = "missing"
        elif (len(mine) < 2 and len(theirs) < 2) or p is None:
            decision = "single"
        else:
            decision = "pass" if p[0] <= alpha else "fail" if p[1] <= alpha else "straddle"
        out.append(MachineChange(machine, len(mine), len(theirs), Spread.of([v for _, v in theirs]).center,
                                 None if contrast is None else contrast.pct,
                                 bounds[0] if bounds else None, bounds[1] if bounds else None, decision))
    return out


def cpu_probes(frames: list[pd.DataFrame]) -> dict[str, float]:
    """Per machine (its runs' blocks), the median `cpu_probe_ms` of every cell of these runs."""
    values: dict[str, list[float]] = {}
    for frame in frames:
        block = frame.attrs.get("block")
        if block and "cpu_probe_ms" in frame.columns:
            values.setdefault(machine_of(tuple(block)), []).extend(float(v) for v in frame["cpu_probe_ms"].dropna())
    return {machine: statistics.median(found) for machine, found in values.items() if found}


def host_dependent(changes: list[MachineChange]) -> bool:
    """Whether one machine's runs put the cell within its limit and another's beyond it."""
    decisions = {c.decision for c in changes}
    return "pass" in decisions and "fail" in decisions
