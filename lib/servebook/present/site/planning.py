"""What a study's candidates would give on more GPUs: replicas times a measured unit (arithmetic, not a measurement),
and what fits in one GPU's memory beside the weights."""

from __future__ import annotations

from ...util.render import Row, Style, Table
from ..load_tables import capacity_groups
from .pages import cell_records
from .summary import RunSummary

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
    the same estimate over runs as the study's tables (estimates.Spread), so one candidate has one capacity."""
    from ...estimates import Spread

    frame = Table(["candidate", "measured unit"] + [f"{n} replicas (arithmetic)" for n in REPLICAS[1:]])
    for label, runs in groups.items():
        css: Style = "accepted" if runs[-1].verdict == "accepted" else ""
        top = runs[-1].decode_at
        decode = [s.decode_value for s in runs if s.decode_value is not None and s.decode_at == top]
        if decode:
            unit = Spread.of(decode).center
            frame.rows.append(Row([label, f"{unit:.1f} tok/s at {top} requests ({_over(len(decode))})"] +
                                  [f"{unit * n:.0f} tok/s" for n in REPLICAS[1:]], css))
        for (_, objectives), values in capacity_groups(cell_records(runs)).items():
            found = [v for v in values if v is not None]
            if found:
                held = Spread.of(found).center
                frame.rows.append(Row([label, f"{held:.3g} requests/s at {objectives} ({_over(len(found))})"] +
                                      [f"{held * n:.3g} requests/s" for n in REPLICAS[1:]], css))
    return frame


def _over(runs: int) -> str:
    return "one run" if runs == 1 else f"geometric mean of {runs} runs"
