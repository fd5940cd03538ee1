"""What a study's candidates would give on more GPUs: replicas times a measured unit (arithmetic, not a measurement),
and what fits in one GPU's memory beside the weights."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...util.render import Row, Style, Table
from ..load_tables import capacity_groups
from .pages import cell_records
from .summary import RunSummary

if TYPE_CHECKING:
    from ...estimates import Spread

#: the replica counts the planning table multiplies by
REPLICAS = (1, 2, 4, 8)


def memory_overview(summaries: list[RunSummary]) -> Table | None:
    """Per model and GPU: the KV arithmetic (checked against the engine's own allocation where it logs one) and,
    where the run recorded its GPU, how many tokens fit beside the weights on one of them."""
    from ...engines.sizing import ModelShape, fit

    rows: dict[tuple, Row] = {}
    for s in summaries:
        memory = s.memory or {}
        if "kv_bytes_per_token" not in memory:
            continue
        gpus = (s.environment or {}).get("gpus") or []
        gpu = f"{gpus[0]['name']} ({gpus[0]['memory_total_mib'] / 1024:.0f} GiB)" if gpus else "CPU (no GPU recorded)"
        model = (s.candidate or {}).get("model") or {}
        key = (model.get("path") or model.get("id") or "-", gpu, memory.get("kv_dtype"))
        if key in rows:
            continue
        pool = "-"
        if gpus:
            shape = ModelShape("m", memory["layers"], memory["layers"], memory["kv_heads"], memory["head_dim"],
                               int(memory["weight_bytes"]))
            fitted = fit(shape, gpu_gib=gpus[0]["memory_total_mib"] / 1024, tensor_parallel=1, context_length=1,
                         kv_dtype=memory.get("kv_dtype"))
            pool = f"{fitted.token_pool:,}"
        rows[key] = Row([key[0], gpu, f"{memory['kv_bytes_per_token']:,.0f} B ({memory.get('kv_dtype')})",
                         f"{memory['weight_bytes'] / 2**30:.2f} GiB",
                         f"{memory['status']} (ratio {memory['kv_ratio']:.4f})", pool],
                        "" if memory["status"] == "agrees" else "invalid")
    if not rows:
        return None
    table = Table(["model", "GPU", "KV per token", "weights", "arithmetic vs engine log", "token pool on one GPU"],
                  title="Memory per model and GPU")
    table.rows = list(rows.values())
    return table


def planning_table(groups: dict[str, list[RunSummary]]) -> Table:
    """Replicas times a measured unit per candidate (`groups`: its runs, newest last): the decode rate at the highest
    concurrency, and the capacity under the objectives (requests/s) where its runs searched one; each the centre of
    the same estimate over runs as the study's tables (estimates.Spread), so one candidate has one capacity. Where
    the study also measured R replicas of a one-replica candidate (the same configuration but launch.replicas and
    launch.gpus), the arithmetic for R stands beside that measurement, with its interval and its share of the sum."""

    measured = _measured_replicas(groups)
    counts = sorted(set(REPLICAS[1:]) | {r for (_, _, r) in measured})
    frame = Table(["candidate", "measured unit"] + [f"{n} replicas" for n in counts])
    for label, runs in groups.items():
        css: Style = "accepted" if runs[-1].verdict == "accepted" else ""
        for figure, unit, text in _units(runs):
            cells = []
            for n in counts:
                arithmetic = f"{_fmt(unit * n, figure)} (arithmetic)"
                found = measured.get((label, figure, n))
                if found is not None:
                    other, spread = found
                    arithmetic += (f"; {other} measured {spread.text('.3g')}: {spread.center / (unit * n):.2f} of "
                                   "the arithmetic")
                cells.append(arithmetic)
            frame.rows.append(Row([label, text] + cells, css))
    return frame


def _figures(runs: list[RunSummary], top: int | None) -> dict[str, list[float]]:
    """Each measured unit's figures over runs: the decode rate at concurrency `top` ("decode@TOP") and the
    capacity under each set of objectives the runs searched ("capacity@OBJECTIVES")."""
    out: dict[str, list[float]] = {}
    decode = [s.decode_value for s in runs if s.decode_value is not None and s.decode_at == top]
    if decode:
        out[f"decode@{top}"] = decode
    for (_, objectives), values in capacity_groups(cell_records(runs)).items():
        found = [v for v in values if v is not None]
        if found:
            out[f"capacity@{objectives}"] = found
    return out


def _units(runs: list[RunSummary]) -> list[tuple[str, float, str]]:
    """(figure, its centre over runs, the unit as shown) for the decode rate at the top concurrency and each
    capacity the runs searched."""
    from ...estimates import Spread

    out = []
    for figure, values in _figures(runs, runs[-1].decode_at).items():
        unit = Spread.of(values).center
        at = figure.split("@", 1)[1]
        shown = f"{unit:.1f} tok/s at {at} requests" if figure.startswith("decode") else f"{unit:.3g} requests/s at {at}"
        out.append((figure, unit, f"{shown} ({_over(len(values))})"))
    return out


def _fmt(value: float, figure: str) -> str:
    return f"{value:.0f} tok/s" if figure.startswith("decode") else f"{value:.3g} requests/s"


def _measured_replicas(groups: dict[str, list[RunSummary]]) -> dict[tuple[str, str, int], tuple[str, "Spread"]]:
    """(one-replica candidate, figure, R) -> (the R-replica candidate, its figure over runs), for each candidate of
    R > 1 replicas whose configuration, replicas and GPUs aside, is a one-replica candidate's."""
    from ...estimates import Spread

    def shape(runs: list[RunSummary]) -> tuple[str, int]:
        candidate = json.loads(json.dumps(runs[-1].candidate or {}))
        launch = candidate.pop("launch", None) or {}
        candidate.pop("name", None)
        replicas = int(launch.pop("replicas", 1) or 1)
        launch.pop("gpus", None)
        return json.dumps([candidate, launch], sort_keys=True), replicas

    shapes = {label: shape(runs) for label, runs in groups.items()}
    units = {key: label for label, (key, replicas) in shapes.items() if replicas == 1}
    out: dict[tuple[str, str, int], tuple[str, Spread]] = {}
    for label, (key, replicas) in shapes.items():
        unit = units.get(key)
        if replicas < 2 or unit is None:
            continue
        for figure, values in _figures(groups[label], groups[unit][-1].decode_at).items():
            out[(unit, figure, replicas)] = label, Spread.of(values)
    return out


def _over(runs: int) -> str:
    return "one run" if runs == 1 else f"geometric mean of {runs} runs"
