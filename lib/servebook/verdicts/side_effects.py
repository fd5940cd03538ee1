"""Side effects: every change beyond the noise in a measured figure that no rule judges (config.figures), so that a
recommendation is read with what it costs (an ITL p99 that doubles beside a decode rate that gains).

A figure of a cell is compared with the baseline's by the estimate the verdict uses (estimates.fit_contrasts: the
study's model of the cell, the other candidates' runs pooling the noise, rounds and machines as blocks), and listed
when its interval (one-sided bounds at the verdict's alpha each) excludes no change. Where the model gives no
interval (no variance: one run per side and no peers), it is listed only when every run's figure of the candidate
lies beyond every run's figure of the baseline, and says so. A percentile read from too few samples in a run of
either side (measure.figures.tails) is listed marked insufficient, never as a plain finding. docs/metrics.md states the rule.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

import pandas as pd

from ..config.figures import FIGURES, Figure
from ..config.metrics import measured_by
from ..config.rules import VerdictRules
from ..estimates import ALPHA, Block, fit_contrasts
from ..measure.figures.tails import Tail, insufficient_tail
from ..measure.kinds import traits_of
from ..util.frames import frame_records
from .comparisons import run_block, select_cells

#: side effects named in a candidate's one line at most (the rest are counted there, and listed in full beside it)
SHOWN = 3
_CANDIDATE, _BASELINE = "candidate", "baseline"
_FIGURE = {f.column: f for f in FIGURES}


@dataclass
class SideEffect:
    """One unjudged figure of one cell that changed beyond the noise: its change, its interval, and how it was found."""

    column: str
    words: str
    cell_id: str
    where: str
    change_pct: float
    low_pct: float | None
    high_pct: float | None
    runs: int
    baseline_runs: int
    worse: bool
    #: "interval": the model's interval excludes no change; "runs": no interval, every run beyond every run
    by: Literal["interval", "runs"] = "interval"
    #: the fewest samples behind the percentile in a run of either side, where too few for its confidence
    tail_samples: int | None = None
    tail_needed: int | None = None
    tail_p: float | None = None

    @property
    def tail(self) -> Tail | None:
        if self.tail_samples is None or self.tail_needed is None:
            return None
        return Tail(self.tail_p or 0.0, self.tail_samples, self.tail_needed)

    @property
    def size(self) -> float:
        """How far from no change, on the log scale the model compares on."""
        return abs(math.log1p(self.change_pct / 100.0)) if self.change_pct > -100 else math.inf

    def figure(self) -> str:
        """'x2.2 [x1.9, x2.6]' for a change of half or double and beyond, else '+23% [+16, +30]'."""
        ratio = 1 + self.change_pct / 100.0
        if ratio >= 2 or ratio <= 0.5:
            said = _times(ratio)
            bounds = None if self.low_pct is None or self.high_pct is None else \
                (_times(1 + self.low_pct / 100.0), _times(1 + self.high_pct / 100.0))
        else:
            said = _pct(self.change_pct) + "%"
            bounds = None if self.low_pct is None or self.high_pct is None else \
                (_pct(self.low_pct), _pct(self.high_pct))
        if self.by == "runs":
            return f"{said} (every one of {self.runs} runs beyond every one of the baseline's {self.baseline_runs})"
        return f"{said} [{bounds[0]}, {bounds[1]}]" if bounds else said

    def text(self) -> str:
        """'ITL p99, prose at 4 requests: x2.2 [x1.9, x2.6]', marked where its tail is insufficient."""
        tail = self.tail
        marked = f", {tail.words()}" if tail is not None else ""
        return f"{self.words}, {self.where}: {self.figure()}{marked}"

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if not k.startswith("tail_") or v is not None}


_FIELDS = {f.name for f in fields(SideEffect)}


def side_effect_from(data: dict) -> SideEffect:
    """A SideEffect from a verdict event's dict (unknown keys dropped)."""
    return SideEffect(**{k: v for k, v in data.items() if k in _FIELDS})


def _times(ratio: float) -> str:
    return f"x{ratio:.1f}" if ratio >= 1 else f"x{ratio:.2f}"


def _pct(value: float) -> str:
    return f"{value:+.0f}" if abs(value) >= 10 else f"{value:+.1f}"


def cell_where(row: dict[str, Any]) -> str:
    """Where a cell is, in words: 'prose at 4 requests', 'at 8192 tokens', or its id."""
    kind, n = row.get("kind"), row.get("concurrency")
    # the metric registry names the kind that measures prefill (no kind is compared by its name outside its home)
    if kind == measured_by("prefill_tok_s") and _known(row.get("target_prompt_tokens")):
        return f"at {int(row['target_prompt_tokens'])} tokens"
    if traits_of(kind).by_concurrency and _known(n) and n:
        return f"{row.get('category') or kind} at {int(n)} request{'s' if int(n) != 1 else ''}"
    return str(row["cell_id"])


def _known(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _number(value: Any) -> float | None:
    try:
        found = float(value)
    except (TypeError, ValueError):
        return None
    return found if math.isfinite(found) and found > 0 else None  # compared on the log scale, as the model does


Figures = dict[tuple[str, str], list[tuple[Block, float]]]


def _figures(runs: list[pd.DataFrame], rows: dict[str, dict] | None = None) -> Figures:
    """(cell id, column) -> (block, figure) in each run that has it; per cell one column per figure's words (the
    first in config.figures), so the same figure is never compared twice under two columns."""
    out: Figures = {}
    for position, cells in enumerate(runs):
        block = run_block(cells, position)
        for row in frame_records(cells):
            said: set[str] = set()
            for figure in FIGURES:
                value = _number(row.get(figure.column)) if figure.column in cells.columns else None
                if value is None or figure.words in said:
                    continue
                said.add(figure.words)
                out.setdefault((str(row["cell_id"]), figure.column), []).append((block, value))
            if rows is not None:
                rows.setdefault(str(row["cell_id"]), row)
    return out


def _judged(runs: list[pd.DataFrame], rules: VerdictRules) -> set[tuple[str, str]]:
    """(cell id, column) of every figure a rule or a guard judges: those are the verdict's, not side effects."""
    judged: set[tuple[str, str]] = set()
    for rule in [*rules.rules, *rules.guards]:
        for cells in runs:
            judged |= {(str(cell), rule.metric) for cell in select_cells(cells, rule)["cell_id"]}
    return judged


def side_effects(runs: list[pd.DataFrame], baseline_runs: list[pd.DataFrame], rules: VerdictRules,
                 peers: dict[str, list[pd.DataFrame]] | None = None, alpha: float = ALPHA) -> list[SideEffect]:
    """Every unjudged figure of the candidate's cells (`runs`: its undisturbed cells) that changed beyond the noise
    against the baseline's, worse ones first, then the largest change first."""
    rows: dict[str, dict] = {}
    mine, theirs = _figures(runs, rows), _figures(baseline_runs)
    others = {name: _figures(frames) for name, frames in (peers or {}).items()}
    judged = _judged([*runs, *baseline_runs], rules)
    found = []
    for key, values in mine.items():
        if key in judged or key not in theirs:
            continue
        groups = {_CANDIDATE: values, _BASELINE: theirs[key],
                  **{f"peer:{name}": figures[key] for name, figures in others.items() if key in figures}}
        effect = _beyond_noise(_FIGURE[key[1]], rows[key[0]], values, theirs[key], groups, alpha)
        if effect is not None:
            tail = _thinnest_tail(key, [*runs, *baseline_runs])
            if tail is not None:
                effect.tail_samples, effect.tail_needed, effect.tail_p = tail.n, tail.needed, tail.p
            found.append(effect)
    # sizes rounded: a prefill cell's TTFT and E2E p50 are one figure apart by 1e-13, and the last bits differ between
    # numpy builds; ties then read in the figures' own order, so every machine lists them alike
    order = {figure.column: i for i, figure in enumerate(FIGURES)}
    return sorted(found, key=lambda e: (not e.worse, e.tail is not None, -round(e.size, 9), order[e.column], e.cell_id))


def _beyond_noise(figure: Figure, row: dict, values: list[tuple[Block, float]], baseline: list[tuple[Block, float]],
                  groups: dict[str, list[tuple[Block, float]]], alpha: float) -> SideEffect | None:
    contrast = fit_contrasts(groups, _BASELINE).get(_CANDIDATE)
    bounds = contrast.bounds_pct(alpha) if contrast is not None else None
    mine, theirs = [v for _, v in values], [v for _, v in baseline]
    if contrast is not None and bounds is not None:
        rise, fall = bounds[0] > 0, bounds[1] < 0
        change, by = contrast.pct, "interval"
    else:
        rise, fall = min(mine) > max(theirs), max(mine) < min(theirs)
        mean = sum(math.log(v) for v in mine) / len(mine) - sum(math.log(v) for v in theirs) / len(theirs)
        change, by = 100.0 * math.expm1(mean), "runs"
    if not (rise or fall):
        return None
    return SideEffect(figure.column, figure.words, str(row["cell_id"]), cell_where(row), change,
                      bounds[0] if bounds else None, bounds[1] if bounds else None, len(mine), len(theirs),
                      worse=rise if figure.lower_is_better else fall, by=by)  # type: ignore[arg-type]


def _thinnest_tail(key: tuple[str, str], runs: list[pd.DataFrame]) -> Tail | None:
    """The fewest-sampled insufficient tail behind the figure at the cell, over the runs of both sides."""
    cell, column = key
    found = [tail for cells in runs for row in frame_records(cells[cells["cell_id"] == cell])
             if (tail := insufficient_tail(row, column)) is not None]
    return min(found, key=lambda tail: tail.n, default=None)


def line(effects: list[SideEffect], shown: int = SHOWN) -> str:
    """The worse side effects in one clause, worst first: 'ITL p99, prose at 4 requests: x2.2 [x1.9, x2.6]; ...'
    ('' where none is worse), the rest counted."""
    worse = [e for e in effects if e.worse]
    said = "; ".join(e.text() for e in worse[:shown])
    more = len(worse) - shown
    return said + (f"; {more} more worse" if more > 0 else "")
