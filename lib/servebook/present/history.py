"""A configuration's history and two journal slices compared, for the terminal, notebooks and the site."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config.metrics import METRIC_WORDS
from ..util.render import Block, Renderable, Table, Text
from ..verdicts import History, SliceComparison
from .style import AXIS, LAYOUT, PALETTE, fitted


def _short(cell_id: str) -> str:
    return cell_id.replace("decode-", "").replace("prefill-", "prefill ")


@dataclass
class HistoryView(Renderable):
    """Runs in time order with each judged cell's figure, what changed between runs, and the steps found."""

    history: History

    def blocks(self) -> list[Block]:
        h = self.history
        series = h.series
        elsewhere = "; ".join(f"{n} on {m}" for m, n in h.other_machines.items())
        lead = (f"history of {h.candidate}" + (f" (study {h.study})" if h.study else "")
                + f" on {h.machine}, plan {h.plan_id}: {h.runs} runs"
                + (f" (left out: {elsewhere})" if elsewhere else "")
                + (f" ({h.other_plans} under other plans left out)" if h.other_plans else ""))
        blocks: list[Block] = [Text(lead, "heading")]
        if not series:
            return blocks + [Text("no valid cell to follow", "dim")]
        runs: dict[str, dict] = {}
        for line in series:
            for point in line.points:
                runs.setdefault(point.run_id, {"point": point})[(line.metric, line.cell_id)] = point.value
        columns = [(s.metric, s.cell_id) for s in series]
        table = Table(["run", "engine"] + [f"{_short(c)}" for _, c in columns],
                      title="figure per run (" + ", ".join(sorted({METRIC_WORDS[m] for m, _ in columns})) + ")")
        changed_at = {s.points[i].run_id: what for s in series for i, what in s.changes_of_setup()}
        stepped_at = {s.points[step.index].run_id for s in series for step in s.steps}
        for run_id, row in runs.items():
            point = row["point"]
            values = [f"{row[c]:,.0f}" if c in row else "-" for c in columns]
            engine = (point.marks.get("engine_version") or "-").split(" ")[0]
            table.add([run_id[4:], engine] + values,
                      "warn" if run_id in stepped_at else ("dim" if run_id in changed_at else ""))
        blocks.append(table)
        steps = Table(["cell", "step at run", "change [90% interval]", "runs before / after", "what changed there"],
                      title="steps (PELT, each confirmed by a two-sample test over its segments)")
        for line in series:
            for step in line.steps:
                run_id = line.points[step.index].run_id
                steps.add([f"{METRIC_WORDS[line.metric]}, {_short(line.cell_id)}", run_id, step.text(),
                           f"{step.before} / {step.after}", changed_at.get(run_id, "nothing recorded")], "warn")
        blocks.append(steps if steps.rows else Text("no step found in any cell", "accepted"))
        return blocks


@dataclass
class SliceComparisonView(Renderable):
    """B against A per cell, with the verdicts' statistics."""

    result: SliceComparison

    def blocks(self) -> list[Block]:
        r = self.result
        lead = (f"B ({r.b.describe()}, {len(r.runs_b)} runs) against A ({r.a.describe()}, {len(r.runs_a)} runs), "
                f"plan {r.plan_id}")
        table = Table(["metric", "cell", "A", "B", "change of B [90% interval]", "runs A / B", "within the limit?"],
                      title="compare")
        for c in r.comparisons:
            interval = (f" [{c.change_low_pct:+.1f}, {c.change_high_pct:+.1f}]" if c.change_low_pct is not None else "")
            change = "-" if c.change_pct is None else f"{c.change_pct:+.1f}%{interval}" + (", better" if c.better else "")
            verdict = {"pass": "yes", "straddle": "undecided", "single": "one run per side", "missing": "-",
                       "host": "depends on the machine"}.get(
                c.decision, "no")
            table.add([METRIC_WORDS[c.metric], _short(c.cell_id), _figure(c.baseline), _figure(c.value), change,
                       f"{c.baseline_runs} / {c.runs}", f"{verdict} (limit {c.limit_pct:g}%)"],
                      "warn" if verdict in ("undecided", "no") else "")
        method = next((c.method for c in r.comparisons if c.method), "")
        return [Text(lead, "heading"), table, Text(f"one-sided 5% bounds each; {method}", "dim")]


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


@fitted
def history_spec(history: History) -> dict:
    """Each followed cell relative to its first runs (100 = the median before the first step), run by run; dashed
    lines where the engine, image, driver or configuration changed, red rings where a step was confirmed."""
    traces: list[dict[str, Any]] = []
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    marked: set[int] = set()
    for i, line in enumerate(history.series):
        values = [p.value for p in line.points]
        first = values[:line.steps[0].index] if line.steps else values
        reference = sorted(first)[len(first) // 2]
        color = PALETTE[i % len(PALETTE)]
        traces.append({"type": "scatter", "mode": "lines+markers", "name": f"{METRIC_WORDS[line.metric]}, "
                       f"{_short(line.cell_id)}", "x": list(range(1, len(values) + 1)),
                       "y": [100 * v / reference for v in values], "line": {"color": color, "width": 1.5},
                       "text": [f"{p.run_id} ({p.marks.get('engine_version') or '-'}): {p.value:,.0f}"
                                for p in line.points],
                       "hovertemplate": "%{text}<extra>%{fullData.name}</extra>"})
        for step in line.steps:
            traces.append({"type": "scatter", "mode": "markers", "showlegend": False, "x": [step.index + 1],
                           "y": [100 * values[step.index] / reference], "hoverinfo": "text",
                           "text": [f"step {step.text()}"],
                           "marker": {"size": 16, "color": "rgba(0,0,0,0)", "line": {"color": "#b42318", "width": 2}}})
        for at, what in line.changes_of_setup():
            if at in marked:
                continue
            marked.add(at)
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": at + 0.5, "x1": at + 0.5, "y0": 0,
                           "y1": 1, "line": {"color": "#6b7280", "dash": "dash", "width": 1}})
            annotations.append({"x": at + 0.5, "y": 1, "xref": "x", "yref": "paper", "text": what, "showarrow": False,
                                "font": {"size": 10, "color": "#6b7280"}, "xanchor": "left", "yanchor": "bottom"})
    layout = {**LAYOUT, "title": {"text": f"{history.candidate} over time, relative to its first runs"},
              "xaxis": {**AXIS, "title": {"text": "run, oldest first"}},
              "yaxis": {**AXIS, "title": {"text": "% of the first runs' median"}},
              "legend": {"title": {"text": "cell"}}, "shapes": shapes, "annotations": annotations}
    return {"data": traces, "layout": layout}
