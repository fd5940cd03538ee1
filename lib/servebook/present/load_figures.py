"""Figures of latency under load: the chunk gaps of the interference probes beside each prefill
(measure.kinds.prefill.probes), and the engine's own gauges (measure.observers.gauges) on the run's time axis, each
cell a band of it.

As in figures.py, each figure is a plain dict (`*_spec`) the site embeds, from data a run yields once (`*_data`),
which the site's summary caches as JSON.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..journal.store import RunRecord
from ..util.frames import frame_records
from .style import AXIS as _AXIS
from .style import LAYOUT as _LAYOUT
from .style import PALETTE, fitted

#: points per gauge drawn at most (every n-th sample beyond): a page stays light however long the run
MAX_POINTS = 1500
#: how each gauge is drawn: its words and the axis it goes on (requests, or the KV share in percent)
GAUGE_LINES = {"running": ("running requests", "y"), "waiting": ("waiting requests", "y"),
               "preemptions": ("preemptions so far", "y"), "kv_usage": ("KV cache in use (%)", "y2")}


#: Chunk-gap bins, the same for every run so that histograms overlay: 8 per doubling from 0.1 ms to about 13 s.
GAP_EDGES_MS = np.round(0.1 * 2.0 ** (np.arange(0, 17 * 8 + 1) / 8), 6)


def _trimmed(counts) -> dict:
    """Counts over the shared bins, cut to the bins from the first to the last that counted anything."""
    used = np.nonzero(counts)[0]
    if used.size == 0:
        return {"edges": [], "counts": []}
    first, last = int(used[0]), int(used[-1]) + 1
    return {"edges": GAP_EDGES_MS[first:last + 1].tolist(), "counts": np.asarray(counts)[first:last].tolist()}


def gap_counts(gaps_ms) -> dict:
    """Chunk gaps (ms) counted in the shared bins `GAP_EDGES_MS` (those beyond them in the first or last)."""
    gaps = np.asarray(gaps_ms, dtype=float)
    if gaps.size == 0:
        return {"edges": [], "counts": []}
    counts, _ = np.histogram(np.clip(gaps, GAP_EDGES_MS[0], GAP_EDGES_MS[-1]), bins=GAP_EDGES_MS)
    return _trimmed(counts)


def probe_gap_data(run: RunRecord, cells: list[dict] | None = None) -> dict:
    """The chunk gaps (ms) of a run's interference probes, in the shared bins of the ITL distribution. `cells`: the
    run's cell rows where the caller has them (the site read them already: reading them again was a third of
    summarising a run)."""
    if run.status != "completed":
        return {"edges": [], "counts": []}
    if cells is None:
        table = run.table("cells")
        cells = [] if table is None else frame_records(table)
    import pandas as pd

    if not any(pd.notna(c.get("probe_requests")) for c in cells):
        return {"edges": [], "counts": []}
    requests, chunks = run.table("requests"), run.table("chunks")
    if requests is None or "probe" not in requests or chunks is None or chunks.empty:
        return {"edges": [], "counts": []}
    probes = set(requests[requests["probe"].astype(bool) & requests["error"].isna()]["request_id"])
    gaps = chunks[chunks["request_id"].isin(probes) & chunks["gap_s"].notna()]["gap_s"].to_numpy() * 1000
    return gap_counts(gaps)


def gauge_data(run: RunRecord) -> dict[str, Any]:
    """A run's gauge samples on one time axis (seconds from its first sample), each cell's span, and per gauge its
    times, values and cells (thinned to MAX_POINTS); {} where the run sampled none (gauges.parquet is optional)."""
    frame = run.table("gauges") if run.status == "completed" else None
    if frame is None or frame.empty:
        return {}
    start = float(frame["t"].min())
    cells = list(dict.fromkeys(frame["cell_id"]))
    spans = frame.groupby("cell_id", sort=False)["t"].agg(["min", "max"])
    out: dict[str, Any] = {"cells": [{"cell_id": c, "start": float(spans.loc[c, "min"]) - start,
                                      "end": float(spans.loc[c, "max"]) - start} for c in cells], "series": {}}
    index = {c: i for i, c in enumerate(cells)}
    for name, rows in frame.groupby("name", sort=False):
        rows = rows.sort_values("t")
        values = rows["value"].to_numpy(dtype=float)
        if name == "preemptions":  # a counter: what the run preempted since its first sample
            values = values - values[0]
        elif name == "kv_usage":
            values = values * 100
        step = max(1, -(-len(rows) // MAX_POINTS))
        out["series"][str(name)] = {"t": (rows["t"].to_numpy()[::step] - start).round(3).tolist(),
                                    "v": values[::step].round(4).tolist(),
                                    "cell": [index[c] for c in rows["cell_id"].to_numpy()[::step]]}
    return out


@fitted
def gauge_spec(data: dict[str, Any], title: str = "The engine's load during the run, as its /metrics said") -> dict:
    """Running and waiting requests (and preemptions) against the left axis, KV cache use (%) against the right,
    over the run's time; each cell is a shaded band, named where the cells are few."""
    cells = data.get("cells") or []
    names = [c["cell_id"] for c in cells]
    traces = []
    for i, (name, (words, axis)) in enumerate(GAUGE_LINES.items()):
        series = (data.get("series") or {}).get(name)
        if not series or (name == "preemptions" and not any(series["v"])):
            continue
        traces.append({"type": "scatter", "mode": "lines", "name": words, "x": series["t"], "y": series["v"],
                       "yaxis": axis, "line": {"shape": "hv", "width": 1.6, "color": PALETTE[i % len(PALETTE)]},
                       "customdata": [names[c] for c in series["cell"]],
                       "hovertemplate": "%{x:.1f} s, %{customdata}: %{y:.4g}<extra>%{fullData.name}</extra>"})
    shapes = [{"type": "rect", "xref": "x", "yref": "paper", "x0": c["start"], "x1": c["end"], "y0": 0, "y1": 1,
               "fillcolor": "#f3f4f6" if i % 2 == 0 else "#e5e7eb", "opacity": 0.6, "line": {"width": 0},
               "layer": "below"} for i, c in enumerate(cells)]
    annotations = [{"text": c["cell_id"], "x": (c["start"] + c["end"]) / 2, "y": 1.0, "xref": "x", "yref": "paper",
                    "showarrow": False, "textangle": -90, "xanchor": "center", "yanchor": "top",
                    "font": {"size": 9, "color": "#6b7280"}} for c in cells] if len(cells) <= 16 else []
    layout = {**_LAYOUT, "title": {"text": title}, "shapes": shapes, "annotations": annotations,
              "legend": {"title": {"text": "gauge"}},
              "xaxis": {**_AXIS, "title": {"text": "seconds into the run (cells shaded)"}},
              "yaxis": {**_AXIS, "title": {"text": "requests"}, "rangemode": "tozero"},
              "yaxis2": {**_AXIS, "title": {"text": "KV cache in use (%)"}, "overlaying": "y", "side": "right",
                         "range": [0, 100], "showgrid": False}}
    if not traces:
        layout["annotations"] = [{"text": "no gauges sampled", "showarrow": False, "xref": "paper", "yref": "paper",
                                  "x": 0.5, "y": 0.5}]
    return {"data": traces, "layout": layout}


def has_gauges(data: dict[str, Any] | None) -> bool:
    return bool(data and data.get("series"))

