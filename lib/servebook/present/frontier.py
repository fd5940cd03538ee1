"""The load a configuration holds: latency and goodput against offered load with the objectives drawn, the capacity
with its interval per candidate, and the Pareto front of speed per user against throughput per GPU.

Like figures.py, every chart is a plain plotly figure dict, built from cell records that carry their run's context
(`frontier_context`): the plan's objectives and the GPUs the engine used. The site and the notebooks draw with
these same functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from ..config.metrics import measured_by
from ..estimates import Spread
from ..measure.kinds import traits_of
from .style import AXIS as _AXIS
from .style import LAYOUT, PALETTE, fitted
from .tables import number

_LAYOUT = {**LAYOUT, "height": 400, "margin": {"t": 60, "b": 50, "l": 60, "r": 20}, "legend": {}}


def frontier_context(plan: dict[str, Any] | None, candidate: dict[str, Any] | None, host_gpus: int) -> dict[str, Any]:
    """What the load charts need from a run besides its cells: the objectives its plan named and the GPUs its engine
    used (tensor-parallel width times replicas, 0 on a host without GPUs)."""
    slo = (plan or {}).get("slo") or {}
    knobs = (candidate or {}).get("knobs") or {}
    launch = (candidate or {}).get("launch") or {}
    gpus = int(knobs.get("tensor_parallel_size") or 1) * int(launch.get("replicas") or 1) if host_gpus else 0
    return {"slo_ttft_s": slo.get("ttft_s"), "slo_tpot_s": slo.get("tpot_s"), "slo_e2e_s": slo.get("e2e_s"),
            "slo_target": slo.get("attainment"), "gpus": gpus}


def _colors(cells: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    names = list(dict.fromkeys(str(c.get("candidate")) for c in cells))
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def _runs(cells: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """(candidate, run) -> that run's cells, in the order given."""
    out: dict[tuple[str, str], list[dict]] = {}
    for c in cells:
        out.setdefault((str(c.get("candidate")), str(c.get("run_id"))), []).append(c)
    return out


def _empty(layout: dict, text: str) -> dict:
    layout["annotations"] = [{"text": text, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}]
    return {"data": [], "layout": layout}


def load_cells(cells: list[dict]) -> list[dict]:
    """Open-loop cells (fixed rates and capacity probes) with an offered rate."""
    return [c for c in cells if traits_of(c.get("kind")).open_loop and number(c.get("offered_rps"))]


def _probe_line(candidate: str, color: str, group: list[dict], x: list[float], y: list, customdata: list,
                hover: str, axis: str = "", legend: bool = True) -> dict:
    """One run's probes as a line, invalid ones (a client that fell behind, a fault) crossed."""
    return {"type": "scatter", "mode": "lines+markers", "name": candidate, "legendgroup": candidate,
            "showlegend": legend, "xaxis": f"x{axis}", "yaxis": f"y{axis}", "x": x, "y": y,
            "line": {"color": color, "width": 1.4},
            "marker": {"symbol": ["circle" if c.get("valid") else "x" for c in group], "size": 8},
            "customdata": customdata, "hovertemplate": hover + "<extra>%{fullData.name}</extra>"}


@fitted
def latency_vs_load_spec(cells: list[dict]) -> dict:
    """TTFT p90 and time per output token p90 against offered requests/s, one line per run (a capacity search's
    probes in rate order), the objectives dashed. A probe the client could not offer, or otherwise invalid, is an x."""
    probes = load_cells(cells)
    colors = _colors(probes)
    layout: dict[str, Any] = {**_LAYOUT, "title": {"text": "Latency p90 vs offered load (dashed: objective)"},
                              "xaxis": {**_AXIS, "type": "log", "domain": [0, 0.46], "title": {"text": "requests/s"}},
                              "yaxis": {**_AXIS, "title": {"text": "TTFT p90 (ms)"}, "rangemode": "tozero"},
                              "xaxis2": {**_AXIS, "type": "log", "domain": [0.56, 1], "anchor": "y2",
                                         "title": {"text": "requests/s"}},
                              "yaxis2": {**_AXIS, "title": {"text": "TPOT p90 (ms)"}, "anchor": "x2",
                                         "rangemode": "tozero"}}
    if not probes:
        return _empty(layout, "no open-loop cells")
    traces: list[dict] = []
    shown: set[str] = set()
    for (candidate, run_id), group in _runs(probes).items():
        group = sorted(group, key=lambda c: float(c["offered_rps"]))
        for axis, column in (("", "ttft_p90_s"), ("2", "tpot_p90_s")):
            traces.append(_probe_line(
                candidate, colors[candidate], group, [float(c["offered_rps"]) for c in group],
                [None if number(c.get(column)) is None else 1000 * float(c[column]) for c in group],
                [run_id[-6:]] * len(group), "%{x:.3g} requests/s: %{y:.1f} ms (run %{customdata})", axis,
                legend=candidate not in shown))
            shown.add(candidate)
    shapes = []
    for axis, key in (("", "slo_ttft_s"), ("2", "slo_tpot_s")):
        for limit in sorted({float(c[key]) for c in probes if number(c.get(key))}):
            shapes.append({"type": "line", "xref": f"x{axis} domain", "yref": f"y{axis}", "x0": 0, "x1": 1,
                           "y0": 1000 * limit, "y1": 1000 * limit, "line": {"dash": "dash", "color": "#6b7280"}})
    layout["shapes"] = shapes
    return {"data": traces, "layout": layout}


def _arrived(cell: dict) -> float:
    return float(number(cell.get("achieved_rps")) or cell["offered_rps"])


@fitted
def goodput_vs_load_spec(cells: list[dict]) -> dict:
    """Requests/s that met every objective against requests/s that arrived in the window (a Poisson draw around the
    offered rate: 33 arrivals where 40 were meant is 6.6/s at 8 offered); on the dotted diagonal every request met
    them. Where goodput leaves it and falls, the configuration is past what it holds."""
    probes = load_cells(cells)
    colors = _colors(probes)
    layout: dict[str, Any] = {**_LAYOUT, "title": {"text": "Goodput vs arrivals (dotted: all met)"},
                              "xaxis": {**_AXIS, "title": {"text": "requests/s that arrived"}, "rangemode": "tozero"},
                              "yaxis": {**_AXIS, "title": {"text": "requests/s meeting the objectives"},
                                        "rangemode": "tozero"}}
    if not probes:
        return _empty(layout, "no open-loop cells")
    traces: list[dict] = []
    shown: set[str] = set()
    for (candidate, run_id), group in _runs(probes).items():
        group = sorted(group, key=_arrived)
        shares = [None if number(c.get("slo_attainment")) is None else round(100 * float(c["slo_attainment"]))
                  for c in group]
        traces.append(_probe_line(
            candidate, colors[candidate], group, [_arrived(c) for c in group],
            [number(c.get("goodput_rps")) for c in group],
            [[run_id[-6:], share, float(c["offered_rps"])] for c, share in zip(group, shares, strict=True)],
            "%{x:.3g} arrived (%{customdata[2]:.3g} offered): %{y:.3g} met (%{customdata[1]}%, run %{customdata[0]})",
            legend=candidate not in shown))
        shown.add(candidate)
    rates = [_arrived(c) for c in probes]
    traces.append({"type": "scatter", "mode": "lines", "name": "all met", "x": [0, max(rates)], "y": [0, max(rates)],
                   "line": {"dash": "dot", "color": "#9ca3af"}, "hoverinfo": "skip"})
    return {"data": traces, "layout": layout}


def capacity_rows(cells: list[dict]) -> dict[str, list[dict]]:
    """candidate -> its runs' capacity cells."""
    out: dict[str, list[dict]] = {}
    for c in cells:
        if c.get("kind") == measured_by("capacity_rps") and number(c.get("capacity_rps")) is not None:
            out.setdefault(str(c.get("candidate")), []).append(c)
    return out


@fitted
def capacity_spec(cells: list[dict]) -> dict:
    """Each run's capacity with the interval its probes give (a triangle where the next probe fell off a cliff),
    and, with two runs or more, the candidate's estimate over runs as the capacity table shows it (a diamond: the
    geometric mean with its 95% interval on the log scale, or the range of two runs)."""
    found = capacity_rows(cells)
    layout: dict[str, Any] = {**_LAYOUT, "title": {"text": "Capacity under the objectives"},
                              "xaxis": {**_AXIS, "title": {"text": "requests/s held"}, "rangemode": "tozero"},
                              "yaxis": {**_AXIS, "type": "category", "automargin": True},
                              "height": max(260, 90 + 60 * len(found)), "showlegend": False,
                              "margin": {**_LAYOUT["margin"], "b": 50}}
    if not found:
        return _empty(layout, "no capacity searched")
    colors = _colors([{"candidate": name} for name in found])
    traces: list[dict] = []
    for name, rows in found.items():
        values = [float(r["capacity_rps"]) for r in rows]
        traces.append({
            "type": "scatter", "mode": "markers", "name": name, "y": [name] * len(rows), "x": values,
            "marker": {"color": colors[name], "size": 9, "opacity": 0.8,
                       "symbol": ["triangle-right" if r.get("capacity_cliff") else "circle" for r in rows]},
            "error_x": {"type": "data", "symmetric": False, "thickness": 1.2, "width": 4,
                        "array": [max(0.0, (number(r.get("capacity_high_rps")) or v) - v)
                                  for r, v in zip(rows, values, strict=True)],
                        "arrayminus": [max(0.0, v - (number(r.get("capacity_low_rps")) or v))
                                       for r, v in zip(rows, values, strict=True)]},
            "customdata": [str(r.get("run_id", ""))[-6:] for r in rows],
            "hovertemplate": "%{x:.3g} requests/s (run %{customdata})<extra>%{fullData.name}</extra>"})
        # the same estimate as the capacity table and the planning table (estimates.Spread)
        estimate = Spread.of(values)
        if estimate.n >= 2 and estimate.low is not None and estimate.high is not None:
            traces.append({"type": "scatter", "mode": "markers", "name": f"{name}: over runs", "y": [name],
                           "x": [estimate.center], "marker": {"symbol": "diamond", "size": 13, "color": colors[name],
                                                              "line": {"color": "black", "width": 1}},
                           "error_x": {"type": "data", "symmetric": False, "array": [estimate.high - estimate.center],
                                       "arrayminus": [estimate.center - estimate.low], "thickness": 2.4, "width": 8},
                           "hovertemplate": f"geometric mean of {estimate.n} runs: %{{x:.3g}} "
                                            f"{estimate.text('.3g').split(' ', 1)[1]}<extra>{name}</extra>"})
    return {"data": traces, "layout": layout}


def user_rate(cell: dict) -> float:
    """Output tokens over the whole wait a user sees: median TTFT plus the decode time at the per-request rate. The
    decode rate alone would flatter a configuration that queues: with 8 slots and 16 requests, half of them wait a
    whole turn for their first token and then decode faster than with 32 slots."""
    rate = float(cell["per_request_tok_s"])
    tokens, ttft = number(cell.get("output_tokens")), number(cell.get("ttft_s"))
    if not tokens or ttft is None or tokens < 2:
        return rate
    return tokens / (ttft + (tokens - 1) / rate)


class ParetoPoint(TypedDict):
    candidate: str
    concurrency: int
    runs: int
    per_user: float
    per_gpu: float
    gpus: int
    #: no other point is at least as good on both and better on one
    front: bool


def pareto_points(cells: list[dict]) -> list[ParetoPoint]:
    """Per candidate and decode concurrency: the geometric mean over runs (estimates.Spread) of tokens/s per user
    (`user_rate`) and of tokens/s per GPU (per server on a host without GPUs), with the point's place on the front of
    all candidates' points."""
    at: dict[tuple[str, int], list[dict]] = {}
    for c in cells:
        if c.get("kind") == measured_by("per_request_tok_s") and c.get("valid") and number(c.get("per_request_tok_s")) \
                and number(c.get("aggregate_tok_s")):
            at.setdefault((str(c.get("candidate")), int(c["concurrency"])), []).append(c)
    points: list[ParetoPoint] = []
    for (candidate, concurrency), rows in at.items():
        share = max(1, int(number(rows[0].get("gpus")) or 0))
        points.append({"candidate": candidate, "concurrency": concurrency, "runs": len(rows),
                       "per_user": Spread.of([user_rate(r) for r in rows]).center,
                       "per_gpu": Spread.of([float(r["aggregate_tok_s"]) / share for r in rows]).center,
                       "gpus": int(number(rows[0].get("gpus")) or 0), "front": False})
    for p in points:
        p["front"] = not any(q["per_user"] >= p["per_user"] and q["per_gpu"] >= p["per_gpu"]
                             and (q["per_user"] > p["per_user"] or q["per_gpu"] > p["per_gpu"]) for q in points)
    return points


@fitted
def pareto_spec(cells: list[dict]) -> dict:
    """Speed each user sees against throughput per GPU, one point per candidate and concurrency (over runs),
    each candidate's points joined in concurrency order; the front (no other point better on both) is a grey step
    line. A configuration off the front is beaten on both at some concurrency by another."""
    points = pareto_points(cells)
    per = "GPU" if any(p["gpus"] for p in points) else "server (no GPU)"
    layout: dict[str, Any] = {**_LAYOUT, "title": {"text": f"Pareto front: per user vs per {per}"},
                              "xaxis": {**_AXIS, "title": {"text": f"output tok/s per {per}"}, "rangemode": "tozero"},
                              "yaxis": {**_AXIS, "title": {"text": "output tok/s per user, first-token wait included"},
                                        "rangemode": "tozero"}}
    if not points:
        return _empty(layout, "no valid decode cells")
    colors = _colors(points)
    traces: list[dict] = []
    for name in colors:
        mine = sorted((p for p in points if p["candidate"] == name), key=lambda p: p["concurrency"])
        traces.append({
            "type": "scatter", "mode": "lines+markers+text", "name": name, "x": [p["per_gpu"] for p in mine],
            "y": [p["per_user"] for p in mine], "text": [str(p["concurrency"]) for p in mine],
            "textposition": "top center", "line": {"color": colors[name], "width": 1.2},
            "marker": {"color": colors[name], "size": [12 if p["front"] else 7 for p in mine],
                       "line": {"color": ["black" if p["front"] else colors[name] for p in mine], "width": 1}},
            "customdata": [p["runs"] for p in mine],
            "hovertemplate": "%{text} requests: %{y:.1f} tok/s per user, %{x:.1f} per " + per
                             + " (geometric mean of %{customdata} runs)<extra>%{fullData.name}</extra>"})
    front = sorted((p for p in points if p["front"]), key=lambda p: p["per_gpu"])
    traces.append({"type": "scatter", "mode": "lines", "name": "front", "x": [p["per_gpu"] for p in front],
                   "y": [p["per_user"] for p in front], "line": {"shape": "vh", "dash": "dot", "color": "#6b7280"},
                   "hoverinfo": "skip"})
    return {"data": traces, "layout": layout}


def frontier_specs(cells: list[dict]) -> list[dict]:
    """The load charts a set of cells supports: latency and goodput where open-loop cells were measured, capacity
    where it was searched, the Pareto front where two or more decode concurrencies were."""
    specs = []
    if load_cells(cells):
        specs += [latency_vs_load_spec(cells), goodput_vs_load_spec(cells)]
    if capacity_rows(cells):
        specs.append(capacity_spec(cells))
    decode = measured_by("per_request_tok_s")
    if len({(c.get("candidate"), c.get("concurrency")) for c in cells if c.get("kind") == decode}) >= 2:
        specs.append(pareto_spec(cells))
    return specs
