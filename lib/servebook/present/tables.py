"""The one table builder: every figure of a cell is formatted here, for terminal, notebook and site alike."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..config.claims import Verification
from ..util.render import Table
from .claims import claim_text

DECODE_DEFINITIONS = [
    "Aggregate tok/s: sum of completion tokens over the cell / (first send to last finish).",
    "Per request tok/s: median over requests of (completion_tokens - 1) / (t_last - t_first); prompt reading "
    "excluded.",
    "TTFT: median time from send to the first content-bearing chunk.",
    "Output length is forced (ignore_eos + max_tokens) and checked per request; a wrong length makes the cell "
    "invalid.",
    "Reconciliation: the engine's prompt, cached and generated token counters over the cell must equal the client's "
    "usage sums; otherwise the cell is invalid and says by how much.",
]
PREFILL_DEFINITIONS = [
    "Cold prefill tok/s: prompt_tokens / TTFT with max_tokens=1 and a unique first token per request, so nothing "
    "is cached; includes scheduling and first-token overhead. Verified cold by the cached-token counters.",
    "First token: median TTFT of those requests.",
]
REUSE_DEFINITIONS = [
    "Each conversation's turn resends the whole conversation so far plus new tokens, as agents do; conversations "
    "run one after another and start with their own first token, so turn 1 is cold.",
    "First-turn / next-turn TTFT: medians over conversations. Cached share: cached prompt tokens over prompt tokens "
    "of the next turns, as the responses report them; the engine's cache counter is reconciled with that sum.",
]
WAVE_DEFINITIONS = [
    "A wave sends all its requests at once; the next wave goes when the last one finished. Requests beyond the "
    "candidate's slots (as the engine reports them, else as the candidate sets them) wait in the queue.",
    "TTFT p50 / p90: over every request of the cell; the queue wait is in them.",
]
GAP_NOTE = ("Chunk gaps (ITL) are recorded per streamed chunk: speculative decoding sends several tokens in one "
            "chunk, so a gap is not a per-token figure.")


def number(value: Any) -> float | None:
    """A float, or None for missing values (None, NaN, pandas NA, text)."""
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if value != value else value


def fmt(value: Any, spec: str = ".1f", scale: float = 1.0, suffix: str = "") -> str:
    figure = number(value)
    return "-" if figure is None else f"{figure * scale:{spec}}{suffix}"


def cell_check(cell: Any) -> str:
    """'valid; counters ok', 'valid; counters not_available' (as recorded: never shortened to ok), or
    'INVALID: why'."""
    if bool(cell["valid"]):
        return f"valid; counters {cell['reconciliation']}"
    return f"INVALID: {cell['invalid_reasons']}"




def records(cells) -> list[dict]:
    """Cells as plain dicts: the site has them so already, and pandas costs milliseconds per small frame."""
    if isinstance(cells, pd.DataFrame):
        return [] if cells.empty else cells.to_dict("records")
    return list(cells)


def _of_kind(cells, kind: str) -> list[dict]:
    return [c for c in records(cells) if c.get("kind") == kind]


def _rows(rows: list[dict], order: list[str]) -> list[dict]:
    def key(cell: dict) -> tuple:
        return tuple((v is None or v != v, v if v is not None and v == v else 0)
                     for v in (cell.get(c) for c in order))

    return sorted(rows, key=key)


def _by(rows: list[dict], column: str) -> dict:
    """Rows grouped by a column, groups in order of first appearance."""
    groups: dict = {}
    for row in rows:
        groups.setdefault(row.get(column), []).append(row)
    return groups


def decode_tables(cells, label: str | None = None) -> list[Table]:
    """Per prompt category: Concurrency | Aggregate | Per request | TTFT | Check (and the candidate first
    when `label` names a column that tells runs apart)."""
    tables = []
    for category, group in _by(_of_kind(cells, "decode"), "category").items():
        table = Table(([label.capitalize()] if label else []) + ["Concurrency", "Aggregate tok/s",
                                                                 "Per request tok/s", "TTFT", "Check"],
                      title=f"Decode, {category} prompts")
        for cell in _rows(group, ["order", "concurrency"] if label else ["concurrency"]):
            table.add(([cell[label]] if label else []) + [
                int(cell["concurrency"]), fmt(cell["aggregate_tok_s"]), fmt(cell["per_request_tok_s"]),
                fmt(cell["ttft_s"], ".0f", 1000, " ms"), cell_check(cell)], "" if cell["valid"] else "invalid")
        tables.append(table)
    return tables


def prefill_table(cells, label: str | None = None) -> Table | None:
    prefill = _of_kind(cells, "prefill")
    if not prefill:
        return None
    table = Table(([label.capitalize()] if label else []) + ["Prompt tokens", "Prefill tok/s", "First token",
                                                             "Engine's first token", "Engine's prompt time",
                                                             "Check"], title="Cold prefill")
    for cell in _rows(prefill, ["order", "target_prompt_tokens"] if label else ["target_prompt_tokens"]):
        table.add(([cell[label]] if label else []) + [
            int(cell["target_prompt_tokens"]), fmt(cell["prefill_tok_s"], ".0f"),
            fmt(cell["ttft_s"], ".0f", 1000, " ms"), fmt(cell.get("engine_ttft_s"), ".0f", 1000, " ms"),
            fmt(cell.get("engine_prompt_s"), ".0f", 1000, " ms"), cell_check(cell)], "" if cell["valid"] else "invalid")
    return table


def wave_table(cells, label: str | None = None) -> Table | None:
    """Bursts beyond the slot count: how long the queued requests wait for their first token."""
    waves = _of_kind(cells, "wave")
    if not waves:
        return None
    table = Table(([label.capitalize()] if label else []) + ["Requests at once", "Slots", "Queued", "Aggregate tok/s",
                                                             "TTFT p50", "TTFT p90", "Engine's queue (mean)",
                                                             "Check"],
                  title="Waves beyond the slot count (queue wait shows in TTFT)")
    for cell in _rows(waves, ["order", "concurrency"] if label else ["concurrency"]):
        slots = number(cell.get("slots"))
        table.add(([cell[label]] if label else []) + [
            int(cell["concurrency"]), "-" if slots is None else int(slots),
            "-" if number(cell.get("queued")) is None else int(cell["queued"]), fmt(cell["aggregate_tok_s"]),
            fmt(cell["ttft_s"], ".0f", 1000, " ms"), fmt(cell["ttft_p90_s"], ".0f", 1000, " ms"),
            fmt(cell.get("engine_queue_s"), ".0f", 1000, " ms"), cell_check(cell)],
            "" if cell["valid"] else "invalid")
    return table


def reuse_table(cells, label: str | None = None) -> Table | None:
    """Prompt reuse across turns: what the cache saves the next turn."""
    reuse = _of_kind(cells, "reuse")
    if not reuse:
        return None
    table = Table(([label.capitalize()] if label else []) + ["Requests", "First-turn TTFT", "Next-turn TTFT",
                                                             "Cached share (next turns)", "Check"],
                  title="Prompt reuse across turns")
    for cell in _rows(reuse, ["order"] if label else ["cell_id"]):
        table.add(([cell[label]] if label else []) + [
            int(cell["requests"]), fmt(cell.get("first_turn_ttft_s"), ".0f", 1000, " ms"),
            fmt(cell.get("next_turn_ttft_s"), ".0f", 1000, " ms"), fmt(cell.get("cached_share"), ".0%"),
            cell_check(cell)], "" if cell["valid"] else "invalid")
    return table


#: (title, metric, cell kind, format spec, scale) of the side-by-side figures of a comparison
COMPARED_METRICS = [
    ("Aggregate decode tok/s", "aggregate_tok_s", "decode", ".1f", 1.0),
    ("Per-request decode tok/s (median)", "per_request_tok_s", "decode", ".0f", 1.0),
    ("TTFT ms (median)", "ttft_s", "decode", ".0f", 1000.0),
    ("Cold prefill tok/s", "prefill_tok_s", "prefill", ".0f", 1.0),
    ("Waves: TTFT p90 ms (queue wait)", "ttft_p90_s", "wave", ".0f", 1000.0),
    ("Waves: aggregate tok/s", "aggregate_tok_s", "wave", ".1f", 1.0),
    ("Reuse: next-turn TTFT ms", "next_turn_ttft_s", "reuse", ".0f", 1000.0),
    ("Reuse: cached share of next turns", "cached_share", "reuse", ".0%", 1.0),
]


def side_by_side(cells: pd.DataFrame, labels: list[str]) -> list[Table]:
    """One table per metric: a row per cell, a column per candidate (cells carry a `label` column)."""
    tables = []
    if cells.empty:
        return tables
    for title, metric, kind, spec, scale in COMPARED_METRICS:
        subset = cells[cells["kind"] == kind]
        if subset.empty:
            continue
        pivot = subset.pivot_table(index="cell_id", columns="label", values=metric, aggfunc="first", sort=False)
        columns = [label for label in labels if label in pivot.columns]
        table = Table(["cell"] + columns, title=title)
        for cell_id, row in pivot[columns].iterrows():
            table.add([cell_id] + [fmt(v, spec, scale) for v in row.values])
        tables.append(table)
    return tables


#: (column, metric, format spec, scale) of a decode estimate table
_DECODE_ESTIMATES = [("Aggregate tok/s", "aggregate_tok_s", ".1f", 1.0),
                     ("Steady-state tok/s", "steady_tok_s", ".1f", 1.0),
                     ("Per request tok/s", "per_request_tok_s", ".1f", 1.0),
                     ("TTFT ms", "ttft_s", ".0f", 1000.0)]
_PREFILL_ESTIMATES = [("Prefill tok/s", "prefill_tok_s", ".0f", 1.0), ("First token ms", "ttft_s", ".0f", 1000.0)]
_WAVE_ESTIMATES = [("Aggregate tok/s", "aggregate_tok_s", ".1f", 1.0), ("TTFT p50 ms", "ttft_s", ".0f", 1000.0),
                   ("TTFT p90 ms", "ttft_p90_s", ".0f", 1000.0)]
_REUSE_ESTIMATES = [("First-turn TTFT ms", "first_turn_ttft_s", ".0f", 1000.0),
                    ("Next-turn TTFT ms", "next_turn_ttft_s", ".0f", 1000.0)]


def estimate_text(values: list, spec: str, scale: float = 1.0) -> str:
    """'412.3 [398.1, 426.5]': the mean over runs with its 95% interval; one run is just its figure."""
    from ..estimates import Estimate

    figures = [v * scale for v in (number(x) for x in values) if v is not None]
    if not figures:
        return "-"
    e = Estimate.of(figures)
    if e.low is None:
        return f"{e.mean:{spec}}"
    return f"{e.mean:{spec}} [{e.low:{spec}}, {e.high:{spec}}]"


def estimate_tables(cells: pd.DataFrame, label: str = "candidate") -> list[Table]:
    """Per category (and for cold prefill): each candidate's mean over its runs with a 95% interval, valid
    cells only. Runs are the unit: a cell's figure in each run is one observation."""
    if cells.empty or "kind" not in cells:
        return []
    valid = cells[cells["valid"].astype(bool)]
    tables = []
    titles = {"prefill": ("Cold prefill", "Prompt tokens"), "wave": ("Waves beyond the slot count", "Requests at once"),
              "reuse": ("Prompt reuse across turns", "Requests")}
    for kind, key, columns in (("decode", "concurrency", _DECODE_ESTIMATES),
                               ("prefill", "target_prompt_tokens", _PREFILL_ESTIMATES),
                               ("wave", "concurrency", _WAVE_ESTIMATES), ("reuse", "requests", _REUSE_ESTIMATES)):
        part = valid[valid["kind"] == kind]
        for category, group in (part.groupby("category", sort=False) if kind == "decode" else [(None, part)]):
            if group.empty:
                continue
            title, key_title = (f"Decode, {category} prompts", "Concurrency") if kind == "decode" else titles[kind]
            table = Table([label.capitalize(), key_title, "Runs"]
                          + [c[0] for c in columns if c[1] in group], title=title + " (mean of runs, 95% interval)")
            order = list(dict.fromkeys(group[label]))
            for name in order:
                mine = group[group[label] == name]
                for at, rows in mine.groupby(key, sort=True):
                    table.add([name, int(at), len(rows)] + [estimate_text(list(rows[metric]), spec, scale)
                                                            for _, metric, spec, scale in columns if metric in group])
            tables.append(table)
    return tables


def verification_table(verification: Verification | dict | None) -> Table | None:
    """Each claim of the candidate against the engine's own report: verified, contradicted, or claimed only (a
    dict: a verification as the site's cached summaries hold it)."""
    if isinstance(verification, dict):
        verification = Verification.model_validate(verification)
    if verification is None or not verification.claims:
        return None
    table = Table(["claim", "what the server reports"], title="Claims checked against the server's self-report")
    for name, claim in verification.claims.items():
        table.add([name, claim_text(claim)], "" if claim.checked else "warn")
    return table


def memory_table(memory: dict | None) -> Table | None:
    """The model's KV arithmetic against the KV cache the engine logged at load."""
    if not memory or "kv_cells" not in memory:
        return None
    table = Table(["KV cells", "engine log", "arithmetic", "ratio", "per token", "weights", "check"],
                  title="Memory: the arithmetic against the engine's own KV allocation")
    table.add([memory["kv_cells"], f"{memory['kv_logged_mib']:.2f} MiB", f"{memory['kv_arithmetic_mib']:.2f} MiB",
               f"{memory['kv_ratio']:.4f}", f"{memory['kv_bytes_per_token']:.0f} B ({memory.get('kv_dtype')})",
               f"{memory['weight_bytes'] / 2**20:.1f} MiB", memory["status"]],
              "" if memory["status"] == "agrees" else "invalid")
    return table


def fit_table(fits: list, gpu_gib: float, kv_dtype: str | None) -> Table:
    """Replicas versus wider tensor parallelism on one host, from the memory arithmetic."""
    context = fits[0].context_length if fits else "-"
    table = Table(["TP", "replicas", "token pool per replica", f"one request of {context} tokens, per GPU",
                   f"requests at {context} tokens per replica", "requests on the host"],
                  title=f"What fits: {gpu_gib:g} GiB per GPU, KV {kv_dtype or 'f16'} (arithmetic, not measured)")
    for f in fits:
        table.add([f.tensor_parallel, f.replicas, f"{f.token_pool:,}", f"{f.request_bytes_per_gpu / 2**30:.3f} GiB",
                   f.requests_at_context, f.total_requests])
    return table
