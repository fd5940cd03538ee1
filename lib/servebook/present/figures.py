"""Plotly figures of runs. The notebooks and the site draw with these same functions.

Each chart is built as a plain figure dict (`*_spec`), which is what the site embeds: plotly's
graph objects validate every property on construction, which costs tens of milliseconds per
chart and would dominate a site build of a thousand runs. Notebooks get `plotly.graph_objects`
figures wrapped around the same dicts.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from ..journal.store import RunRecord

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
_LAYOUT = {
    "paper_bgcolor": "white", "plot_bgcolor": "white", "height": 380,
    "margin": {"t": 50, "b": 45, "l": 60, "r": 20},
    "font": {"family": "system-ui, sans-serif", "size": 12},
    "legend": {"title": {"text": "candidate / prompts"}},
}
_AXIS = {"gridcolor": "#e5e7eb", "zerolinecolor": "#d1d5db", "linecolor": "#9ca3af"}


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
        frames.append(cells)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _clean(values) -> list:
    return [None if v is None or (isinstance(v, float) and np.isnan(v)) else float(v) for v in values]


def _line_spec(cells: pd.DataFrame, x: str, y: str, title: str, x_title: str, y_title: str, kind: str,
               scale: float = 1.0, split_category: bool = True) -> dict:
    traces = []
    subset = cells[cells["kind"] == kind] if not cells.empty and "kind" in cells else pd.DataFrame()
    colors: dict[str, str] = {}
    if not subset.empty:
        groups = ["candidate", "category"] if split_category and kind == "decode" else ["candidate"]
        for keys, group in subset.groupby(groups, sort=False):
            keys = keys if isinstance(keys, tuple) else (keys,)
            color = colors.setdefault(keys[0], PALETTE[len(colors) % len(PALETTE)])
            group = group.sort_values(x)
            invalid = ~group["valid"].astype(bool)
            traces.append({
                "type": "scatter", "mode": "lines+markers", "name": " / ".join(str(k) for k in keys),
                "x": _clean(group[x]), "y": [None if v is None else v * scale for v in _clean(group[y])],
                "line": {"color": color, "dash": "dot" if len(keys) > 1 and keys[1] == "code" else "solid"},
                "marker": {"symbol": ["x" if bad else "circle" for bad in invalid], "size": 9},
                "hovertemplate": f"%{{x}}: %{{y:.1f}} {y_title}<extra>%{{fullData.name}}</extra>",
            })
    layout = {**_LAYOUT, "title": {"text": title},
              "xaxis": {**_AXIS, "title": {"text": x_title}, "type": "log"},
              "yaxis": {**_AXIS, "title": {"text": y_title}, "rangemode": "tozero"}}
    if kind == "decode":
        layout["xaxis"]["dtick"] = 0.30103  # log2 steps: 1, 2, 4, 8 evenly spaced
    if not traces:
        layout["annotations"] = [{"text": "no measured cells", "showarrow": False, "xref": "paper", "yref": "paper",
                                  "x": 0.5, "y": 0.5}]
    return {"data": traces, "layout": layout}


def aggregate_vs_concurrency_spec(cells: pd.DataFrame) -> dict:
    return _line_spec(cells, "concurrency", "aggregate_tok_s", "Aggregate decode rate vs concurrency",
                      "concurrent requests", "tok/s", "decode")


def per_request_vs_concurrency_spec(cells: pd.DataFrame) -> dict:
    return _line_spec(cells, "concurrency", "per_request_tok_s", "Per-request decode rate vs concurrency",
                      "concurrent requests", "tok/s per request", "decode")


def ttft_vs_concurrency_spec(cells: pd.DataFrame) -> dict:
    return _line_spec(cells, "concurrency", "ttft_s", "Median TTFT vs concurrency", "concurrent requests", "ms",
                      "decode", scale=1000.0)


def prefill_vs_prompt_size_spec(cells: pd.DataFrame) -> dict:
    return _line_spec(cells, "target_prompt_tokens", "prefill_tok_s", "Cold prefill rate vs prompt size",
                      "prompt tokens", "tok/s", "prefill", split_category=False)


def chunk_gap_histogram_data(run: RunRecord, bins: int = 50) -> dict:
    """Binned gaps between content chunks of a run's decode requests (ms)."""
    chunks = run.table("chunks") if run.status == "completed" else None
    if chunks is None or chunks.empty:
        return {"centers": [], "counts": [], "width": 0.0}
    gaps = (chunks[chunks["cell_id"].str.startswith("decode") & chunks["gap_s"].notna()]["gap_s"] * 1000).to_numpy()
    if gaps.size == 0:
        return {"centers": [], "counts": [], "width": 0.0}
    top = float(np.percentile(gaps, 99.5)) or float(gaps.max()) or 1.0
    counts, edges = np.histogram(np.clip(gaps, 0, top), bins=bins, range=(0, top))
    return {"centers": ((edges[:-1] + edges[1:]) / 2).round(4).tolist(), "counts": counts.tolist(),
            "width": float(edges[1] - edges[0])}


def chunk_gap_spec(histograms: dict[str, dict]) -> dict:
    """Gaps between content chunks in decode cells, per candidate. A gap is not a per-token figure
    when a drafter sends several tokens in one chunk."""
    traces = [{"type": "bar", "name": name, "x": h["centers"], "y": h["counts"], "width": h["width"],
               "opacity": 0.6, "marker": {"color": PALETTE[i % len(PALETTE)]}}
              for i, (name, h) in enumerate(histograms.items()) if h["counts"]]
    layout = {**_LAYOUT, "title": {"text": "Chunk gaps in decode cells (the last 0.5% folded into the top bin)"},
              "barmode": "overlay", "legend": {"title": {"text": "candidate"}},
              "xaxis": {**_AXIS, "title": {"text": "gap between chunks (ms)"}},
              "yaxis": {**_AXIS, "title": {"text": "chunks"}}}
    if not traces:
        layout["annotations"] = [{"text": "no chunk timings recorded", "showarrow": False, "xref": "paper",
                                  "yref": "paper", "x": 0.5, "y": 0.5}]
    return {"data": traces, "layout": layout}


def figure_specs(cells: pd.DataFrame, gap_histograms: dict[str, dict]) -> list[dict]:
    """Every chart of a set of runs, as figure dicts (what the site embeds)."""
    return [aggregate_vs_concurrency_spec(cells), per_request_vs_concurrency_spec(cells),
            ttft_vs_concurrency_spec(cells), prefill_vs_prompt_size_spec(cells), chunk_gap_spec(gap_histograms)]


def as_figure(spec: dict):
    import plotly.graph_objects as go

    return go.Figure(spec)


def run_figures(runs: list[RunRecord]) -> list:
    """The same charts as plotly figures, for notebooks."""
    specs = figure_specs(cells_frame(runs), {run.candidate_label: chunk_gap_histogram_data(run) for run in runs})
    return [as_figure(spec) for spec in specs]
