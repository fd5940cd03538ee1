"""A figure against replica count with the ideal line: what N replicas held next to N times what the fewest held.

The site draws it on a study page whose candidates differ in launch.replicas: capacity under the objectives where
the runs measured one, else aggregate decode at their highest concurrency. Each point is the runs' estimate as every
table and chart shows it (estimates.Spread: the geometric mean with its 95% interval on the log scale, or the range of
two runs); the ideal line is the fewest replicas' estimate multiplied, so the gap
between the two is the scaling efficiency the verdict's scaling rule judges (with its own interval).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..estimates import Spread
from .style import AXIS, LAYOUT, PALETTE, fitted


@dataclass(frozen=True)
class ScalingPoint:
    """One run's figure at its replica count."""

    replicas: int
    value: float
    #: what the figure is, in words with its unit (every point of one chart has the same)
    figure: str


def _means(points: list[ScalingPoint]) -> dict[int, Spread]:
    by_count: dict[int, list[float]] = {}
    for point in points:
        by_count.setdefault(point.replicas, []).append(point.value)
    return {n: Spread.of(values) for n, values in sorted(by_count.items())}


@fitted
def scaling_spec(points: list[ScalingPoint]) -> dict:
    """Mean over runs per replica count with its interval, and the ideal line from the fewest replicas' mean."""
    means = _means(points)
    counts = list(means)
    figure = points[0].figure if points else "figure"
    measured = {
        "type": "scatter", "mode": "lines+markers", "name": "measured (geometric mean of runs, 95% interval)",
        "x": counts, "y": [e.center for e in means.values()], "customdata": [e.n for e in means.values()],
        "error_y": {"type": "data", "symmetric": False, "thickness": 1.2, "width": 4,
                    "array": [None if e.high is None else e.high - e.center for e in means.values()],
                    "arrayminus": [None if e.low is None else e.center - e.low for e in means.values()]},
        "line": {"color": PALETTE[0]}, "marker": {"size": 9},
        "hovertemplate": f"%{{x}} replicas: %{{y:.3g}} {figure} (geometric mean of %{{customdata}} runs)<extra></extra>"}
    data = [measured]
    if counts:
        first = counts[0]
        unit = means[first].center / first
        data.append({"type": "scatter", "mode": "lines", "name": f"ideal: N/{first} x the mean at {first}",
                     "x": counts, "y": [unit * n for n in counts], "hoverinfo": "skip",
                     "line": {"color": "#374151", "dash": "dash", "width": 1.2}})
    layout = {**LAYOUT, "title": {"text": f"{figure} against replica count"},
              "xaxis": {**AXIS, "title": {"text": "replicas"}, "tickvals": counts, "rangemode": "tozero"},
              "yaxis": {**AXIS, "title": {"text": figure}, "rangemode": "tozero"},
              "legend": {"title": {"text": "scaling"}}}
    return {"data": data, "layout": layout}
