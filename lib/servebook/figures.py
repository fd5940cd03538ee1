"""Plotly figures of runs. The notebooks and the site draw with these same functions."""

from __future__ import annotations

from typing import Iterable

import pandas as pd

from .journal import RunRecord

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]


def cells_frame(runs: Iterable[RunRecord]) -> pd.DataFrame:
    """Valid and invalid cells of completed runs, one row per (run, cell), labelled by candidate."""
    frames = []
    for run in runs:
        if run.status != "completed":
            continue
        cells = run.table("cells")
        if cells is None or cells.empty:
            continue
        cells = cells.copy()
        cells["run_id"] = run.run_id
        cells["candidate"] = (run.manifest or {}).get("study_entry") or run.candidate_label
        frames.append(cells)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _line_figure(cells: pd.DataFrame, x: str, y: str, title: str, x_title: str, y_title: str,
                 kind: str, split_category: bool = True):
    import plotly.graph_objects as go

    figure = go.Figure()
    subset = cells[cells["kind"] == kind] if not cells.empty else cells
    if subset.empty:
        figure.add_annotation(text="no measured cells", showarrow=False)
    groups = ["candidate", "category"] if split_category and kind == "decode" else ["candidate"]
    colors = {}
    for keys, group in (subset.groupby(groups, sort=False) if not subset.empty else []):
        keys = keys if isinstance(keys, tuple) else (keys,)
        candidate = keys[0]
        color = colors.setdefault(candidate, PALETTE[len(colors) % len(PALETTE)])
        group = group.sort_values(x)
        invalid = ~group["valid"].astype(bool)
        figure.add_trace(go.Scatter(
            x=group[x], y=group[y], mode="lines+markers", name=" / ".join(str(k) for k in keys),
            line={"color": color, "dash": "dot" if len(keys) > 1 and keys[1] == "code" else "solid"},
            marker={"symbol": ["x" if bad else "circle" for bad in invalid], "size": 9},
            hovertemplate=f"%{{x}}: %{{y:.1f}} {y_title}<extra>%{{fullData.name}}</extra>",
        ))
    figure.update_layout(title=title, xaxis_title=x_title, yaxis_title=y_title, template="plotly_white",
                         legend_title_text="candidate / prompts", height=380, margin={"t": 50, "b": 40})
    if kind == "decode":
        figure.update_xaxes(type="log", dtick=0.30103)  # 1, 2, 4, 8 evenly spaced
    else:
        figure.update_xaxes(type="log")
    return figure


def aggregate_vs_concurrency(cells: pd.DataFrame):
    return _line_figure(cells, "concurrency", "aggregate_tok_s", "Aggregate decode rate vs concurrency",
                        "concurrent requests", "tok/s", "decode")


def per_request_vs_concurrency(cells: pd.DataFrame):
    return _line_figure(cells, "concurrency", "per_request_tok_s", "Per-request decode rate vs concurrency",
                        "concurrent requests", "tok/s per request", "decode")


def ttft_vs_concurrency(cells: pd.DataFrame):
    frame = cells.copy()
    if not frame.empty:
        frame["ttft_ms"] = frame["ttft_s"] * 1000
    return _line_figure(frame, "concurrency", "ttft_ms", "Median TTFT vs concurrency",
                        "concurrent requests", "ms", "decode")


def prefill_vs_prompt_size(cells: pd.DataFrame):
    return _line_figure(cells, "target_prompt_tokens", "prefill_tok_s", "Cold prefill rate vs prompt size",
                        "prompt tokens", "tok/s", "prefill", split_category=False)


def decode_chunk_gaps_ms(run: RunRecord) -> list[float]:
    chunks = run.table("chunks") if run.status == "completed" else None
    if chunks is None or chunks.empty:
        return []
    gaps = chunks[chunks["cell_id"].str.startswith("decode") & chunks["gap_s"].notna()]["gap_s"] * 1000
    return gaps.round(3).tolist()


def chunk_gap_histogram(gaps_ms: dict[str, list[float]]):
    """Gaps between content chunks of decode requests, per candidate. A gap is not a per-token
    figure when a drafter sends several tokens in one chunk."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for i, (name, gaps) in enumerate(gaps_ms.items()):
        if gaps:
            figure.add_trace(go.Histogram(x=gaps, name=name, opacity=0.6, nbinsx=60,
                                          marker_color=PALETTE[i % len(PALETTE)]))
    if not any(gaps_ms.values()):
        figure.add_annotation(text="no chunk timings recorded", showarrow=False)
    figure.update_layout(title="Chunk gaps in decode cells", xaxis_title="gap between chunks (ms)",
                         yaxis_title="chunks", barmode="overlay", template="plotly_white", height=380)
    return figure


def chunk_gap_distribution(runs: Iterable[RunRecord]):
    return chunk_gap_histogram({(run.manifest or {}).get("study_entry") or run.candidate_label:
                                decode_chunk_gaps_ms(run) for run in runs})


def run_figures(runs: list[RunRecord]) -> list:
    cells = cells_frame(runs)
    return [aggregate_vs_concurrency(cells), per_request_vs_concurrency(cells), ttft_vs_concurrency(cells),
            prefill_vs_prompt_size(cells), chunk_gap_distribution(runs)]
