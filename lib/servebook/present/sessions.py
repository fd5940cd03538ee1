"""The session view of agents cells: turns against time per session, context growth, cached share against ideal,
and TTFT against context length. One figure dict per run (what the site embeds); notebooks wrap the same dict.

The data is read once from a run's requests (`session_view_data`), as columns, so the site caches it with the run's
summary and never reads the requests again.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..journal.store import RunRecord
from ..util.frames import frame_records
from .kinds import session_view_kinds
from .style import AXIS, LAYOUT, PALETTE, fitted

#: the columns of a run's session view, one value per turn
COLUMNS = ("session", "subagent", "turn", "send_s", "first_s", "end_s", "prompt", "cached", "ideal", "overflow",
           "failed")


def _number(value: Any) -> float | None:
    return None if value is None or value != value else float(value)


def session_view_data(run: RunRecord) -> dict[str, list]:
    """Every turn of the run's agents cells, as columns (COLUMNS), times from the cell's first send; empty where
    the run measured none."""
    cells = run.table("cells") if run.status == "completed" else None
    if cells is None or "kind" not in cells:
        return {}
    ids = set(cells.loc[cells["kind"].isin(session_view_kinds()), "cell_id"])
    requests = run.table("requests") if ids else None
    if requests is None or "parent_conversation" not in requests:
        return {}
    turns = requests[requests["cell_id"].isin(ids)].sort_values("t_send")
    if turns.empty:
        return {}
    start = float(turns["t_send"].min())
    out: dict[str, list] = {name: [] for name in COLUMNS}
    for row in frame_records(turns):
        parent = _number(row.get("parent_conversation"))
        out["session"].append(int(parent if parent is not None else row.get("conversation") or 0))
        out["subagent"].append(parent is not None)
        out["turn"].append(int(row.get("turn") or 0))
        for name, column in (("send_s", "t_send"), ("first_s", "t_first"), ("end_s", "t_last")):
            value = _number(row.get(column))
            out[name].append(None if value is None else round(value - start, 4))
        for name, column in (("prompt", "prompt_tokens"), ("cached", "cached_tokens"),
                             ("ideal", "ideal_cached_tokens")):
            value = _number(row.get(column))
            out[name].append(None if value is None else int(value))
        out["overflow"].append(bool(row.get("context_overflow")))
        out["failed"].append(isinstance(row.get("error"), str))
    return out


def newest_sessions(views: Iterable[dict[str, list]]) -> dict[str, list]:
    """A candidate's session view: its newest run's that measured agent sessions (runs in the order recorded)."""
    found = [view for view in views if view]
    return found[-1] if found else {}


def _rows(data: dict[str, list]) -> list[dict[str, Any]]:
    return [dict(zip(COLUMNS, values, strict=True)) for values in zip(*(data[c] for c in COLUMNS), strict=True)] \
        if data else []


def _timeline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each turn a bar from its send to its last token on its session's row, the wait for the first token drawn
    apart; sub-agents' turns, overflowed and failed turns in their own colours."""
    def segments(chosen: list[dict[str, Any]], start: str, end: str) -> tuple[list, list]:
        xs: list = []
        ys: list = []
        for r in chosen:
            if r[start] is not None and r[end] is not None:
                xs += [r[start], r[end], None]
                ys += [r["session"], r["session"], None]
        return xs, ys

    out = []
    kinds = (("parent", [r for r in rows if not r["subagent"]], PALETTE[0]),
             ("sub-agent", [r for r in rows if r["subagent"]], PALETTE[3]))
    for name, chosen, color in kinds:
        if not chosen:
            continue
        xs, ys = segments(chosen, "first_s", "end_s")
        out.append({"type": "scatter", "mode": "lines", "name": f"{name} turns: decoding", "x": xs, "y": ys,
                    "line": {"color": color, "width": 5}, "xaxis": "x", "yaxis": "y", "hoverinfo": "skip"})
        xs, ys = segments(chosen, "send_s", "first_s")
        out.append({"type": "scatter", "mode": "lines", "name": f"{name} turns: waiting for the first token",
                    "x": xs, "y": ys, "line": {"color": color, "width": 2, "dash": "dot"}, "xaxis": "x", "yaxis": "y",
                    "hoverinfo": "skip"})
    bad = [r for r in rows if r["overflow"] or r["failed"]]
    if bad:
        out.append({"type": "scatter", "mode": "markers", "name": "overflowed or failed turn",
                    "x": [r["send_s"] for r in bad], "y": [r["session"] for r in bad],
                    "marker": {"symbol": "x", "color": PALETTE[1], "size": 9}, "xaxis": "x", "yaxis": "y"})
    return out


def _growth(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each session's prompt (its context) turn by turn, and TTFT against that context."""
    traces = []
    sessions = sorted({r["session"] for r in rows})
    for i, session in enumerate(sessions):
        own = [r for r in rows if r["session"] == session and not r["subagent"] and r["prompt"] is not None]
        traces.append({"type": "scatter", "mode": "lines+markers", "name": f"session {session}",
                       "x": [r["turn"] for r in own], "y": [r["prompt"] for r in own], "showlegend": False,
                       "line": {"color": PALETTE[i % len(PALETTE)], "width": 1}, "marker": {"size": 4},
                       "xaxis": "x2", "yaxis": "y2",
                       "hovertemplate": f"session {session}, turn %{{x}}: %{{y}} prompt tokens<extra></extra>"})
    served = [r for r in rows if r["prompt"] is not None and r["first_s"] is not None and r["send_s"] is not None]
    traces.append({"type": "scatter", "mode": "markers", "name": "TTFT of a turn", "x": [r["prompt"] for r in served],
                   "y": [round(1000 * (r["first_s"] - r["send_s"]), 1) for r in served],
                   "marker": {"color": [PALETTE[3] if r["subagent"] else PALETTE[0] for r in served], "size": 5,
                              "opacity": 0.7},
                   "xaxis": "x3", "yaxis": "y3", "hovertemplate": "%{x} prompt tokens: %{y:.0f} ms<extra></extra>"})
    return traces


def cached_by_turn(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per turn number, over the sessions that reached it: cached and ideal tokens over prompt tokens."""
    out = []
    for turn in sorted({r["turn"] for r in rows}):
        own = [r for r in rows if r["turn"] == turn and r["prompt"]]
        prompt = sum(r["prompt"] for r in own)
        if not prompt:
            continue
        cached = None if any(r["cached"] is None for r in own) else sum(r["cached"] for r in own) / prompt
        ideal = None if any(r["ideal"] is None for r in own) else sum(r["ideal"] for r in own) / prompt
        out.append({"turn": turn, "cached_share": cached, "ideal_share": ideal, "turns": len(own)})
    return out


def _shares(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    points = cached_by_turn(rows)
    return [{"type": "scatter", "mode": "lines+markers", "name": name, "x": [p["turn"] for p in points],
             "y": [p[key] for p in points], "line": {"color": color, "dash": dash}, "xaxis": "x4", "yaxis": "y4",
             "customdata": [p["turns"] for p in points],
             "hovertemplate": f"turn %{{x}}: %{{y:.0%}} {name} (%{{customdata}} turns)<extra></extra>"}
            for name, key, color, dash in (("cached (measured)", "cached_share", PALETTE[2], "solid"),
                                           ("ideal", "ideal_share", "#374151", "dash"))]


@fitted
def session_view_spec(data: dict[str, list], title: str) -> dict[str, Any]:
    """Four panels of one run's agent sessions: turns against time, context growth, TTFT against context, and the
    cached share of each turn's prompt against the ideal."""
    rows = _rows(data)
    grid = {"x": ([0, 0.45], [0.56, 1]), "x2": ([0.55, 1], [0.56, 1]), "x3": ([0, 0.45], [0, 0.4]),
            "x4": ([0.55, 1], [0, 0.4])}
    titles = {"x": ("time since the cell's first send (s)", "session"), "x2": ("turn", "prompt tokens (context)"),
              "x3": ("prompt tokens", "TTFT (ms)"), "x4": ("turn", "share of the prompt cached")}
    layout: dict[str, Any] = {**LAYOUT, "title": {"text": f"Agent sessions: {title}"}, "height": 760,
                              "legend": {"title": {"text": "turns"}}}
    for axis, (domain_x, domain_y) in grid.items():
        suffix = axis[1:]
        x_title, y_title = titles[axis]
        layout[f"xaxis{suffix}"] = {**AXIS, "title": {"text": x_title}, "domain": domain_x, "anchor": f"y{suffix}"}
        layout[f"yaxis{suffix}"] = {**AXIS, "title": {"text": y_title}, "domain": domain_y, "anchor": f"x{suffix}",
                                    "rangemode": "tozero"}
    layout["yaxis4"]["tickformat"] = ".0%"
    layout["yaxis4"]["range"] = [0, 1.05]
    if not rows:
        layout["annotations"] = [{"text": "no agent sessions measured", "showarrow": False, "xref": "paper",
                                  "yref": "paper", "x": 0.5, "y": 0.5}]
        return {"data": [], "layout": layout}
    return {"data": _timeline(rows) + _growth(rows) + _shares(rows), "layout": layout}


def session_view(run: RunRecord):
    """The session view of one run, as a plotly figure (notebooks)."""
    import plotly.graph_objects as go

    return go.Figure(session_view_spec(session_view_data(run), run.candidate_label))
