"""A configuration search for readers: its history as a chart (what each launch measured, in order, and the best
so far), beside the tables of what was pruned, screened and confirmed (SearchResult's own blocks)."""

from __future__ import annotations

from ..sweeps.search import SearchResult
from .style import AXIS, LAYOUT, PALETTE, fitted


@fitted
def search_spec(result: SearchResult) -> dict:
    """Screening launches in order with the best figure so far, then each confirmed configuration's runs."""
    lower = result.lower_is_better
    measured = [(i + 1, s) for i, s in enumerate(result.screened) if s.value is not None]
    best, line = None, []
    for _, s in measured:
        value = s.value or 0.0
        best = value if best is None or (value < best if lower else value > best) else best
        line.append(best)
    traces = [
        {"type": "scatter", "mode": "markers", "name": "screened (short plan)", "x": [i for i, _ in measured],
         "y": [s.value for _, s in measured], "text": [f"{s.name}: {s.why}" for _, s in measured],
         "hovertemplate": "%{text}<br>%{y:,.4g}<extra></extra>", "marker": {"color": PALETTE[0], "size": 8}},
        {"type": "scatter", "mode": "lines", "name": "best screened so far", "x": [i for i, _ in measured], "y": line,
         "line": {"color": PALETTE[0], "width": 1, "shape": "hv"}, "hoverinfo": "skip"},
    ]
    start = len(result.screened) + 1
    for k, c in enumerate(result.confirmed):
        xs = list(range(start, start + len(c.values)))
        start += len(c.values)
        traces.append({"type": "scatter", "mode": "markers", "name": ("winner: " if c.name == result.winner else
                                                                       "confirmed: ") + c.name,
                       "x": xs, "y": c.values, "hovertemplate": "%{y:,.4g}<extra>%{fullData.name}</extra>",
                       "marker": {"symbol": "diamond", "size": 10,
                                  "color": "#067647" if c.name == result.winner else PALETTE[(k + 2) % len(PALETTE)]}})
    layout = {**LAYOUT, "title": {"text": f"{result.objective}: {len(result.screened)} screened, "
                                           f"{len(result.confirmed)} confirmed, {len(result.pruned)} pruned unlaunched"},
              "legend": {**LAYOUT.get("legend", {}), "title": {"text": "launches"}},
              "xaxis": {**AXIS, "title": {"text": "launch, in order"}},
              "yaxis": {**AXIS, "title": {"text": result.objective}}}
    return {"data": traces, "layout": layout}
