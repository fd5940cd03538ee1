"""Tables of latency under load as users feel it: each decode cell's inter-token latency (measure.figures.itl), the
interference probes beside each prefill (measure.kinds.prefill.probes) and the engine's own load during every cell
(measure.observers.gauges). Each table takes the cells that carry its figures, whatever their kind."""

from __future__ import annotations

from ..measure.kinds import traits_of
from ..util.render import Table
from .tables import _rows, fmt, number, records, tail_marked

UNDER_LOAD_DEFINITIONS = [
    "ITL: the gaps between a request's consecutive content chunks, pooled over the cell's requests; TTFT is not a "
    "gap, the first gap after it is (the first decode step). p50 / p95 / p99 interpolate linearly; longest: the "
    "cell's longest gap, the stall a reader saw. A percentile from fewer gaps than its confidence needs reads "
    "insufficient (n=...) beside it (docs/metrics.md: 662 for a p99).",
    "Tokens per chunk: completion tokens over content chunks (above 1 when a drafter's accepted run arrives as one "
    "chunk). Per token: each gap over the tokens of the chunk that ended it, where the engine reports them.",
    "Probes (plan.prefill.probes): short cold decode requests beside each prefill request, the first already "
    "decoding when it is sent, then one every interval while it runs; counted apart from the prefill figure. Their "
    "longest gap is the stall of a decode already running, their TTFT a newcomer's wait behind the prefill: what a "
    "prefill chunk size costs the requests beside it.",
    "Engine gauges: sampled from /metrics while the cell ran (plan.gauge_interval_ms): the highest KV cache use "
    "(0-100%), running and waiting requests seen; preemptions: the engine's counter over the cell. '-': the engine "
    "exports no such gauge (llama.cpp exports no KV use and never preempts) or sampling was off.",
]


def _ms(value) -> str:
    return fmt(value, ".1f", 1000.0)


def _tail(cell: dict, column: str) -> str:
    """A percentile in ms, 'insufficient (n=...)' beside it where it rests on too few samples (measure.figures.tails)."""
    return tail_marked(_ms(cell.get(column)), cell, column)


def _lead(cell: dict, label: str | None) -> list:
    return ([cell[label]] if label else []) + [cell["cell_id"]]


def _head(label: str | None, *titles: str) -> list[str]:
    return ([label.capitalize()] if label else []) + ["Cell", *titles]


def _measured(cells, column: str) -> list[dict]:
    return [c for c in records(cells) if not traits_of(c.get("kind")).derived and number(c.get(column)) is not None]


def itl_table(cells, label: str | None = None) -> Table | None:
    """Per decode cell: its chunk gaps' p50, p95, p99 and longest (ms), tokens per chunk, and per token."""
    rows = _measured(cells, "itl_p50_s")
    if not rows:
        return None
    table = Table(_head(label, "Conc.", "ITL p50", "p95", "p99", "longest", "Tok/chunk", "Per token p50", "p99"),
                  title="Inter-token latency per decode cell (ms)")
    for cell in _rows(rows, ["order", "concurrency"] if label else ["concurrency"]):
        table.add(_lead(cell, label) + [
            fmt(cell.get("concurrency"), ".0f"), *(_tail(cell, f"itl_{q}_s") for q in ("p50", "p95", "p99", "max")),
            fmt(cell.get("itl_tokens_per_chunk"), ".2f"), _ms(cell.get("itl_token_p50_s")),
            _ms(cell.get("itl_token_p99_s"))], "" if cell.get("valid") else "invalid")
    return table


def probe_table(cells, label: str | None = None) -> Table | None:
    """Per prefill cell that sent probes: how many, their TTFT p50 and p95, and their chunk gaps (ms)."""
    rows = _measured(cells, "probe_requests")
    if not rows:
        return None
    table = Table(_head(label, "Prompt tokens", "Probes", "TTFT p50", "TTFT p95", "ITL p50", "ITL p99", "longest"),
                  title="Decodes beside each prefill: the stall a prefill causes (ms)")
    for cell in _rows(rows, ["order", "target_prompt_tokens"] if label else ["target_prompt_tokens"]):
        table.add(_lead(cell, label) + [
            fmt(cell.get("target_prompt_tokens"), ".0f"), fmt(cell.get("probe_requests"), ".0f"),
            _tail(cell, "probe_ttft_p50_s"), _tail(cell, "probe_ttft_p95_s"),
            *(_tail(cell, f"probe_itl_{q}_s") for q in ("p50", "p99", "max"))],
            "" if cell.get("valid") else "invalid")
    return table


def gauge_table(cells, label: str | None = None) -> Table | None:
    """Per cell: the engine's load as it reported it while the cell ran."""
    rows = [c for c in records(cells) if not traits_of(c.get("kind")).derived
            and (number(c.get("gauge_samples")) or number(c.get("preemptions")) is not None)]
    if not rows:
        return None
    table = Table(_head(label, "KV use peak", "Running peak", "Waiting peak", "Preemptions", "Samples"),
                  title="The engine's own load during each cell")
    for cell in _rows(rows, ["order"]) if label else rows:
        table.add(_lead(cell, label) + [
            fmt(cell.get("kv_usage_peak"), ".0%"), fmt(cell.get("running_peak"), ".0f"),
            fmt(cell.get("waiting_peak"), ".0f"), fmt(cell.get("preemptions"), ".0f"),
            fmt(cell.get("gauge_samples"), ".0f")], "" if cell.get("valid") else "invalid")
    return table


def under_load_tables(cells, label: str | None = None) -> list[Table]:
    """Every table of this module that the cells have figures for, in reading order."""
    rows = records(cells)
    return [t for t in (itl_table(rows, label), probe_table(rows, label), gauge_table(rows, label)) if t is not None]
