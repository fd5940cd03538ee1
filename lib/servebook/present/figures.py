"""Plotly figures of runs. The notebooks and the site draw with these same functions.

Each chart is built as a plain figure dict (`*_spec`), which is what the site embeds: plotly's
graph objects validate every property on construction, which costs tens of milliseconds per
chart and would dominate a site build of a thousand runs. Notebooks get `plotly.graph_objects`
figures wrapped around the same dicts.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from ..config.metrics import LOWER_IS_BETTER
from ..journal.store import RunRecord
from ..util.frames import frame_records
from .frontier import frontier_context, frontier_specs
from .kinds import PRESENT, LineChart, gap_histogram_kinds, open_loop_kinds, turn_chart_kinds
from .load_figures import GAP_EDGES_MS, _trimmed, gap_counts, gauge_data, gauge_spec, has_gauges, probe_gap_data
from .sessions import newest_sessions, session_view_data, session_view_spec
from .style import AXIS as _AXIS
from .style import LAYOUT as _LAYOUT
from .style import PALETTE, fitted
from .tables import number, records


def cells_frame(runs: Iterable[RunRecord]) -> pd.DataFrame:
    """Cells of completed runs, one row per (run, cell), labelled by candidate."""
    frames = []
    for run in runs:
        if run.status != "completed":
            continue
        cells = run.table("cells")
        if cells is None or cells.empty:
            continue
        cells = cells.copy()
        cells["run_id"] = run.run_id
        cells["candidate"] = run.candidate_label
        for key, value in run_context(run).items():
            cells[key] = value
        frames.append(cells)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def run_context(run: RunRecord) -> dict:
    """The run's objectives and GPUs, which its cells do not carry (see frontier.frontier_context)."""
    manifest = run.manifest
    if manifest is None:
        return frontier_context(None, None, 0)
    return frontier_context(manifest.plan, manifest.candidate, len(manifest.environment.gpus))


def _clean(values) -> list:
    return [None if v is None or (isinstance(v, float) and np.isnan(v)) else float(v) for v in values]


def _points(group: list[dict], x: str, y: str, scale: float) -> dict:
    """Per x: the estimate over runs the tables show (estimates.Spread: the geometric mean with its 95% interval on
    the log scale, or the range of two runs) as plotly error bars; one run gives no bar."""
    from ..estimates import Spread

    at_x: dict[float, list[dict]] = {}
    for row in group:
        value = number(row.get(x))
        if value is not None:
            at_x.setdefault(value, []).append(row)
    xs, ys, plus, minus, runs, bad = [], [], [], [], [], []
    for value in sorted(at_x):
        rows = at_x[value]
        figures = [v * scale for v in (number(r.get(y)) for r in rows) if v is not None]
        if not figures:
            continue
        estimate = Spread.of(figures)
        xs.append(value)
        ys.append(estimate.center)
        plus.append(None if estimate.high is None else estimate.high - estimate.center)
        minus.append(None if estimate.low is None else estimate.center - estimate.low)
        runs.append(estimate.n)
        bad.append(not all(bool(r.get("valid")) for r in rows))
    return {"x": xs, "y": ys, "plus": plus, "minus": minus, "runs": runs, "bad": bad}


@fitted
def _line_spec(cells, x: str, y: str, title: str, x_title: str, y_title: str, kind: str,
               scale: float = 1.0, split_category: bool = False, log2_ticks: bool = False) -> dict:
    """One line per candidate, its runs' estimate as the tables show it (`_points`); decode categories side by side
    (one panel each), so ten candidates stay ten lines per panel. `cells`: a frame or its records."""
    traces = []
    subset = [c for c in records(cells) if c.get("kind") == kind]
    categories = list(dict.fromkeys(c.get("category") for c in subset)) if split_category and subset else [None]
    colors: dict[str, str] = {}  # also: the candidates already in the legend, whichever panel drew them first
    layout: dict[str, Any] = {**_LAYOUT, "title": {"text": title}}
    width = 1.0 / len(categories)
    for i, category in enumerate(categories):
        axis = "" if i == 0 else str(i + 1)
        domain = [i * width + (0.06 if i else 0), (i + 1) * width - (0.02 if i + 1 < len(categories) else 0)]
        layout[f"xaxis{axis}"] = {**_AXIS, "title": {"text": x_title}, "type": "log", "domain": domain,
                                  "anchor": f"y{axis}"}
        layout[f"yaxis{axis}"] = {**_AXIS, "title": {"text": y_title if i == 0 else ""}, "rangemode": "nonnegative",
                                  "anchor": f"x{axis}"}
        if category:
            layout.setdefault("annotations", []).append({
                "text": f"{category} prompts", "showarrow": False, "xref": "paper", "yref": "paper",
                "x": (domain[0] + domain[1]) / 2, "y": 1.02, "xanchor": "center", "yanchor": "bottom"})
        part = subset if category is None else [c for c in subset if c.get("category") == category]
        if log2_ticks:
            layout[f"xaxis{axis}"]["dtick"] = 0.30103  # log2 steps: 1, 2, 4, 8 evenly spaced
        else:
            layout[f"xaxis{axis}"].update(_measured_ticks([row.get(x) for row in part]))
        by_candidate: dict = {}
        for row in part:
            by_candidate.setdefault(row.get("candidate"), []).append(row)
        for candidate, group in by_candidate.items():
            first = candidate not in colors
            color = colors.setdefault(candidate, PALETTE[len(colors) % len(PALETTE)])
            points = _points(group, x, y, scale)
            traces.append({
                "type": "scatter", "mode": "lines+markers", "name": str(candidate), "legendgroup": str(candidate),
                "showlegend": first, "xaxis": f"x{axis}", "yaxis": f"y{axis}",
                "x": points["x"], "y": points["y"], "customdata": points["runs"],
                "error_y": {"type": "data", "symmetric": False, "array": points["plus"],
                            "arrayminus": points["minus"], "thickness": 1.2, "width": 4},
                "line": {"color": color},
                "marker": {"symbol": ["x" if b else "circle" for b in points["bad"]], "size": 9},
                "hovertemplate": f"%{{x}}: %{{y:.1f}} {y_title} (geometric mean of %{{customdata}} runs)"
                                 "<extra>%{fullData.name}</extra>",
            })
    layout["legend"] = {"title": {"text": "candidate (geometric mean of runs, 95% interval; range of 2)"}}
    layout["height"] = 400
    if not traces:
        layout["annotations"] = [{"text": "no measured cells", "showarrow": False, "xref": "paper", "yref": "paper",
                                  "x": 0.5, "y": 0.5}]
    return {"data": traces, "layout": layout}


def _measured_ticks(values: list) -> dict:
    """Ticks at the measured sizes only (512, 2K, 8K, ...): plotly's own on a log axis overlap, and a single point
    gets an axis of its own width around it."""
    xs = sorted({float(v) for v in values if v is not None and v == v and v > 0})
    if not xs:
        return {}
    ticks = {"tickvals": xs, "ticktext": [f"{x / 1024:g}K" if x >= 1024 and x % 1024 == 0 else f"{x:g}" for x in xs]}
    if len(xs) == 1:
        ticks["range"] = [math.log10(xs[0]) - 0.5, math.log10(xs[0]) + 0.5]
    return ticks


@fitted
def forest_spec(comparisons: list[dict]) -> dict:
    """Change vs the baseline with its interval, per candidate and judged cell, the rule's limit drawn:
    a cell whose bar crosses the limit line is what an inconclusive verdict waits on."""
    traces, shapes = [], []
    limits: dict[float, dict[str, list[str]]] = {}  # limit -> metric -> the cells it binds
    cells = list(dict.fromkeys(f"{c['metric']} {c['cell_id']}" for c in comparisons))
    candidates = list(dict.fromkeys(c["candidate"] for c in comparisons))
    row = {name: i for i, name in enumerate(reversed(candidates))}

    def dodge(i: int) -> float:  # the cells of one candidate side by side within its row
        return 0.0 if len(cells) == 1 else -0.3 + 0.6 * i / (len(cells) - 1)

    for i, cell in enumerate(cells):
        rows = [c for c in comparisons if f"{c['metric']} {c['cell_id']}" == cell and c.get("change_pct") is not None]
        if not rows:
            continue
        high = [None if c.get("change_high_pct") is None else c["change_high_pct"] - c["change_pct"] for c in rows]
        low = [None if c.get("change_low_pct") is None else c["change_pct"] - c["change_low_pct"] for c in rows]
        traces.append({
            "type": "scatter", "mode": "markers", "name": cell, "x": [c["change_pct"] for c in rows],
            "y": [row[c["candidate"]] + dodge(i) for c in rows], "text": [c["candidate"] for c in rows],
            "marker": {"color": PALETTE[i % len(PALETTE)], "size": 8},
            "error_x": {"type": "data", "symmetric": False, "array": high, "arrayminus": low, "thickness": 1.5},
            "customdata": [[c["decision"], c["runs"], c["baseline_runs"]] for c in rows],
            "hovertemplate": "%{text}: %{x:+.1f}% (%{customdata[0]}; %{customdata[1]} vs %{customdata[2]} runs)"
                             "<extra>%{fullData.name}</extra>",
        })
        metric = rows[0]["metric"]
        limits.setdefault(rows[0]["limit_pct"] * (1 if metric in LOWER_IS_BETTER else -1), {}).setdefault(
            metric, []).append(rows[0]["cell_id"])
    # The rule's limits, drawn neutrally (not in a cell's colour) and named in the legend with the cells they bind.
    for k, (limit, bound) in enumerate(sorted(limits.items())):
        binds = "; ".join(f"{metric} {', '.join(cell_ids)}" for metric, cell_ids in bound.items())
        traces.append({"type": "scatter", "mode": "lines", "x": [limit, limit], "y": [-0.6, len(row) - 0.4],
                       "name": f"limit {limit:+g}% ({binds})" if len(limits) > 1 else f"limit {limit:+g}%",
                       "line": {"color": "#374151", "dash": ["dash", "dot", "dashdot"][k % 3], "width": 1.2},
                       "hoverinfo": "skip", "legendgroup": "limits"})
    shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": 0, "x1": 0, "y0": 0, "y1": 1,
                   "line": {"color": "#6b7280", "width": 1}})
    title = "Change vs the baseline, one-sided 95% bounds from the study's model"
    layout = {**_LAYOUT, "title": {"text": title},
              "xaxis": {**_AXIS, "title": {"text": "change (%)"}, "zeroline": False},
              "yaxis": {**_AXIS, "tickvals": list(row.values()), "ticktext": list(row), "automargin": True,
                        "range": [-0.6, len(row) - 0.4], "zeroline": False},
              "shapes": shapes, "legend": {"title": {"text": "metric and cell"}},
              "height": max(320, 60 + 40 * len({c["candidate"] for c in comparisons}))}
    if not limits:
        layout["annotations"] = [{"text": "no comparisons judged yet", "showarrow": False, "xref": "paper",
                                  "yref": "paper", "x": 0.5, "y": 0.5}]
    return {"data": traces, "layout": layout}


def chart_spec(cells, kind: str, chart: LineChart) -> dict:
    """One of a kind's charts (present/kinds.py)."""
    return _line_spec(cells, chart.x, chart.y, chart.title, chart.x_title, chart.y_title, kind, scale=chart.scale,
                      split_category=chart.split_category, log2_ticks=chart.log2_ticks)


def aggregate_vs_concurrency_spec(cells) -> dict:
    return chart_spec(cells, "decode", PRESENT["decode"].charts[0])


def prefill_vs_prompt_size_spec(cells) -> dict:
    return chart_spec(cells, "prefill", PRESENT["prefill"].charts[0])


def chunk_gap_histogram_data(run: RunRecord, cells: list[dict] | None = None) -> dict:
    """Gaps between content chunks of a run's closed-loop decode requests (ms; the kinds present/kinds.py marks
    `gap_histogram`), counted in the shared bins `GAP_EDGES_MS`. `cells`: the run's cell rows where the caller has
    them, so they are not read again."""
    path, cells_path = run.table_path("chunks"), run.table_path("cells")
    if run.status != "completed" or not path.is_file() or not cells_path.is_file():
        return {"edges": [], "counts": []}
    rows = frame_records(pd.read_parquet(cells_path)) if cells is None else cells
    if not any("kind" in row for row in rows):
        return {"edges": [], "counts": []}
    chosen = {row["cell_id"] for row in rows if row.get("kind") in gap_histogram_kinds()}
    if not {"cell_id", "gap_s"} <= set(pq.read_schema(path).names):  # a run whose requests all failed has no chunk
        return {"edges": [], "counts": []}
    chunks = pd.read_parquet(path, columns=["cell_id", "gap_s"])
    return gap_counts(chunks[chunks["cell_id"].isin(chosen) & chunks["gap_s"].notna()]["gap_s"].to_numpy() * 1000)


def mean_gap_histogram(histograms: Iterable[dict]) -> dict:
    """A candidate's runs as one outline: chunks per run in each shared bin, so that every run counts (not just the
    newest) and a candidate with more runs does not draw taller."""
    total, runs = np.zeros(len(GAP_EDGES_MS) - 1), 0
    for h in histograms:
        if not h.get("counts"):
            continue
        first = int(np.abs(GAP_EDGES_MS - h["edges"][0]).argmin())
        total[first:first + len(h["counts"])] += h["counts"]
        runs += 1
    return _trimmed(total / max(runs, 1))


@fitted
def chunk_gap_spec(histograms: dict[str, dict],
                   title: str = "Chunk gaps in decode cells (shared bins, 8 per doubling)") -> dict:
    """Gaps between content chunks in decode cells (or, titled so, of the probes beside prefills), per candidate,
    as outlines over the same bins (one candidate never hides another). A gap is not a per-token figure when a
    drafter sends several tokens in one chunk."""
    traces = []
    for i, (name, h) in enumerate(histograms.items()):
        if not h.get("counts") or "edges" not in h:
            continue
        edges, counts = h["edges"], h["counts"]
        traces.append({"type": "scatter", "mode": "lines", "name": name, "line": {"shape": "hv", "width": 1.8,
                                                                              "color": PALETTE[i % len(PALETTE)]},
                       "x": edges, "y": [*counts, counts[-1]],
                       "hovertemplate": "from %{x:.2f} ms: %{y:.4g} chunks per run<extra>%{fullData.name}</extra>"})
    layout = {**_LAYOUT, "title": {"text": title},
              "legend": {"title": {"text": "candidate"}},
              "xaxis": {**_AXIS, "title": {"text": "gap between chunks (ms, log scale)"}, "type": "log"},
              "yaxis": {**_AXIS, "title": {"text": "chunks per run"}, "rangemode": "nonnegative"}}
    if not traces:
        layout["annotations"] = [{"text": "no chunk timings recorded", "showarrow": False, "xref": "paper",
                                  "yref": "paper", "x": 0.5, "y": 0.5}]
    return {"data": traces, "layout": layout}


def turn_ttft_data(run: RunRecord) -> list[dict]:
    """Median TTFT per turn of a run's reuse cell (ms), with the share of each turn's prompt read from the cache."""
    cells = run.table("cells") if run.status == "completed" else None
    if cells is None or "kind" not in cells or not cells["kind"].isin(turn_chart_kinds()).any():
        return []  # only runs that measured a kind of turns have them; the request table is not read for the others
    requests = run.table("requests")
    if requests is None or "turn" not in requests or requests["turn"].isna().all():
        return []
    out = []
    for _, group in requests[requests["turn"].notna() & requests["error"].isna()].groupby("turn"):
        ttft = (group["t_first"] - group["t_send"]).median() * 1000
        cached, prompt = group["cached_tokens"].sum(), group["prompt_tokens"].sum()
        out.append({"turn": int(group["turn"].iloc[0]), "ttft_ms": float(ttft),
                    "cached_share": None if group["cached_tokens"].isna().any() or not prompt else float(cached / prompt)})
    return out


def mean_turns(runs: Iterable[list[dict]]) -> list[dict]:
    """A candidate's runs as one line: per turn, the mean over runs of each run's median TTFT and cached share."""
    at: dict[int, list[dict]] = {}
    for points in runs:
        for point in points:
            at.setdefault(point["turn"], []).append(point)
    out = []
    for turn in sorted(at):
        rows = at[turn]
        shares = [p["cached_share"] for p in rows]
        out.append({"turn": turn, "ttft_ms": float(np.mean([p["ttft_ms"] for p in rows])), "runs": len(rows),
                    "cached_share": None if None in shares else float(np.mean(shares))})
    return out


@fitted
def turn_ttft_spec(turns: dict[str, list[dict]]) -> dict:
    """TTFT of each turn of a growing conversation: turn 1 reads its prompt cold, later turns mostly from cache."""
    traces = [{"type": "scatter", "mode": "lines+markers", "name": name, "x": [t["turn"] for t in points],
               "y": [t["ttft_ms"] for t in points], "line": {"color": PALETTE[i % len(PALETTE)]},
               "customdata": [[None if t["cached_share"] is None else round(100 * t["cached_share"]), t.get("runs", 1)]
                              for t in points],
               "hovertemplate": "turn %{x}: %{y:.0f} ms, %{customdata[0]}% of the prompt cached (mean of "
                                "%{customdata[1]} runs)<extra>%{fullData.name}</extra>"}
              for i, (name, points) in enumerate(turns.items()) if points]
    layout = {**_LAYOUT, "title": {"text": "Prompt reuse: TTFT per turn of a growing conversation (median over "
                                            "conversations, mean of runs)"},
              "xaxis": {**_AXIS, "title": {"text": "turn"}, "dtick": 1},
              "yaxis": {**_AXIS, "title": {"text": "TTFT (ms)"}, "rangemode": "tozero"},
              "legend": {"title": {"text": "candidate"}}}
    return {"data": traces, "layout": layout}


def figure_specs(cells, gap_histograms: dict[str, dict], turns: dict[str, list[dict]] | None = None,
                 probe_gaps: dict[str, dict] | None = None, gauges: dict | None = None,
                 sessions: dict[str, dict] | None = None) -> list[dict]:
    """Every chart of a set of runs, as figure dicts (what the site embeds): each kind's (present/kinds.py) where
    the runs measured it, and the closed-loop charts, empty, for runs that measured no open-loop load; the probes'
    chunk gaps where runs sent probes, one run's gauges on its time axis (`gauges`: load_figures.gauge_data), and
    `sessions`: a session view per candidate (present/sessions.py), from one of its runs."""
    cells = records(cells)  # once, for every chart
    kinds = {c.get("kind") for c in cells}
    # A run that measured only open-loop load gets no empty closed-loop charts
    closed = not kinds & open_loop_kinds()
    specs = []
    for kind, entry in PRESENT.items():
        if kind in kinds or (entry.drawn_unmeasured and closed):
            specs += [chart_spec(cells, kind, chart) for chart in entry.charts]
    # the per-turn chart is read from requests, not cells, and follows the cells' charts
    if turns and any(turns.values()) and any(entry.turn_chart for entry in PRESENT.values()):
        specs.append(turn_ttft_spec(turns))
    specs += [session_view_spec(data, name) for name, data in (sessions or {}).items() if data]
    specs += frontier_specs(cells)
    if any(h.get("counts") for h in gap_histograms.values()) or closed:
        specs.append(chunk_gap_spec(gap_histograms))
    if probe_gaps and any(h.get("counts") for h in probe_gaps.values()):
        specs.append(chunk_gap_spec(probe_gaps, "Chunk gaps of the decodes sent beside each prefill (probes)"))
    if has_gauges(gauges):
        specs.append(gauge_spec(gauges or {}))
    return specs


def as_figure(spec: dict):
    import plotly.graph_objects as go

    return go.Figure(spec)


def run_figures(runs: list[RunRecord]) -> list:
    """The same charts as plotly figures, for notebooks."""
    by_candidate: dict[str, list[RunRecord]] = {}
    for run in runs:
        by_candidate.setdefault(run.candidate_label, []).append(run)
    gaps = {name: mean_gap_histogram(map(chunk_gap_histogram_data, own)) for name, own in by_candidate.items()}
    probes = {name: mean_gap_histogram(map(probe_gap_data, own)) for name, own in by_candidate.items()}
    specs = figure_specs(cells_frame(runs), gaps, {name: mean_turns(map(turn_ttft_data, own))
                                                   for name, own in by_candidate.items()},
                         probes, gauge_data(runs[0]) if len(runs) == 1 else None,
                         {name: newest_sessions(map(session_view_data, own)) for name, own in by_candidate.items()})
    return [as_figure(spec) for spec in specs]
