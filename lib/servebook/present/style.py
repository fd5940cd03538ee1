"""The look every chart shares, on the site and in notebooks: one palette (a candidate keeps its colour from chart
to chart), white paper, light grid, and a legend that fits its frame at any width (`fit`)."""

from __future__ import annotations

import functools
import textwrap
from typing import Any, Callable

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
#: plotly's layout and axis JSON, which every figure copies and extends
LAYOUT: dict[str, Any] = {
    "paper_bgcolor": "white", "plot_bgcolor": "white", "height": 380,
    "margin": {"t": 50, "b": 45, "l": 60, "r": 20},
    "font": {"family": "system-ui, sans-serif", "size": 12},
    "legend": {"title": {"text": "candidate / prompts"}},
}
AXIS: dict[str, Any] = {"gridcolor": "#e5e7eb", "zerolinecolor": "#d1d5db", "linecolor": "#9ca3af"}

#: Characters per line of a legend entry, a title or a category tick. plotly wraps none of them itself, and an entry
#: wider than the chart pushed the plot aside (the verdict chart shrank to 60 px) or ran out of the frame.
LEGEND_CHARS = 34
TITLE_CHARS = 42
TICK_CHARS = 22
#: What the height allows for the legend: rows as a phone's chart (about 330 px wide) lays them out.
_PHONE_PX, _CHAR_PX, _SYMBOL_PX, _LINE_PX, _ENTRY_GAP_PX, _TITLE_PX = 330, 6.6, 44, 16, 9, 24


def wrap(text: str, width: int) -> str:
    """`text` broken into lines of at most `width` characters with plotly's <br>; a name already broken is kept."""
    if len(text) <= width or "<br>" in text:
        return text
    return "<br>".join(textwrap.wrap(text, width))


def _legend_px(names: list[str], title_lines: int) -> int:
    """The height a horizontal legend of these entries (under a title of `title_lines` lines) takes at a phone's
    width (a wider chart needs less)."""
    if not names:
        return 0
    lines = [name.split("<br>") for name in names]
    widest = max(len(line) for entry in lines for line in entry)
    per_row = max(1, int(_PHONE_PX // (_SYMBOL_PX + _CHAR_PX * widest)))
    rows = [max(len(entry) for entry in lines[i:i + per_row]) for i in range(0, len(lines), per_row)]
    return sum(_LINE_PX * n + _ENTRY_GAP_PX for n in rows) + _TITLE_PX * title_lines + 12


def fit(spec: dict[str, Any]) -> dict[str, Any]:
    """The figure made to fit any width: names, titles and category ticks wrapped, the legend laid out in rows
    below the plot and placed against the figure's own box (`yref: container`), which makes plotly reserve room
    for it inside the frame, and the figure made taller by what the legend takes, so the plot keeps its height."""
    layout = spec["layout"]
    entries = []
    for trace in spec["data"]:
        if trace.get("name") is not None:
            trace["name"] = wrap(str(trace["name"]), LEGEND_CHARS)
            if trace.get("showlegend", True):
                entries.append(trace["name"])
    title = layout.get("title") or {}
    if title.get("text"):
        layout["title"] = {"font": {"size": 15}, **title, "text": wrap(title["text"], TITLE_CHARS)}
        lines = layout["title"]["text"].count("<br>")
        layout["margin"] = {**LAYOUT["margin"], **layout.get("margin", {})}
        layout["margin"]["t"] += 18 * lines
        layout["height"] = layout.get("height", LAYOUT["height"]) + 18 * lines
    for key, axis in layout.items():
        if key.startswith(("xaxis", "yaxis")):
            # The legend's reserved room replaces the bottom margin rather than adding to it: without automargin
            # the tick labels and the axis title were drawn under the legend.
            axis.setdefault("automargin", True)
            if axis.get("ticktext"):
                axis["ticktext"] = [wrap(str(t), TICK_CHARS) for t in axis["ticktext"]]
    layout["showlegend"] = layout.get("showlegend", len(entries) > 1)
    if not layout["showlegend"]:
        return spec
    legend = layout.get("legend") or {}
    heading = dict(legend.get("title") or {})
    if heading.get("text"):  # plotly wraps a legend's title no more than its entries: at 390 px one ran out
        heading["text"] = wrap(str(heading["text"]), TITLE_CHARS)
    title_lines = heading["text"].count("<br>") + 1 if heading.get("text") else 0
    layout["legend"] = {**legend, "orientation": "h", "xref": "container", "x": 0, "xanchor": "left",
                        "yref": "container", "y": 0, "yanchor": "bottom", "valign": "top",
                        "maxheight": 1,  # the whole figure, never half of it: a legend that scrolls hides names
                        "title": {**heading, "side": "top"}}
    layout["height"] = layout.get("height", LAYOUT["height"]) + _legend_px(entries, title_lines)
    return spec


def fitted(build: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """A figure builder whose figures `fit`."""
    @functools.wraps(build)
    def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return fit(build(*args, **kwargs))
    return wrapper
