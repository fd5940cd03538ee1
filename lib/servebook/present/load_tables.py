"""Tables of what a reader of `vllm bench serve`, AIPerf or guidellm looks for first: latency percentiles and
throughputs per cell, the open-loop cells against their objectives, and the capacity as a number with the
objectives it was held under. Cell records carry their run's objectives (`frontier.frontier_context`)."""

from __future__ import annotations

from typing import Any

from ..config.metrics import measured_by
from ..measure.kinds import traits_of
from ..util.frames import frame_records
from ..util.render import Table
from .replica_tables import replica_table
from .tables import ESTIMATE_WORDS, _rows, cell_check, estimate_text, fmt, kind_tables, number, records, tail_marked
from .under_load import under_load_tables

LATENCY_DEFINITIONS = [
    "TTFT: send to the first content-bearing chunk. TPOT: (end to end - TTFT) / (completion tokens - 1), per "
    "request of two tokens or more. ITL: every gap between consecutive content chunks, pooled over the cell's "
    "requests (a chunk may carry several tokens). E2E: send to the last chunk.",
    "p50 / p90 / p99 interpolate linearly between requests (as vllm bench serve does); successful requests only, "
    "and in open-loop cells only those inside the measured window.",
    "n: the samples behind a row (requests; chunk gaps for ITL). A percentile read from fewer than its confidence "
    "needs is marked insufficient (n=...): at 99% confidence, 11 for a p50, 64 for a p90, 130 for a p95 and 662 for "
    "a p99 (the MLCommons Endpoints figure), so that the second-largest sample bounds the true quantile "
    "(docs/metrics.md).",
    "Requests/s and total tok/s (prompt + completion): over first send to last finish, or an open-loop cell's "
    "measured window. docs/metrics.md gives the peers' names for each figure.",
]
CAPACITY_DEFINITIONS = [
    "Capacity: the highest request rate at which the share of requests meeting every objective stays at the "
    "target, read from every probe through a non-increasing fit; its interval runs from the highest rate that "
    "certainly holds to the lowest that certainly fails (exact binomial bounds of the probes).",
    "Over runs: the geometric mean of the runs' capacities with a 95% interval on the log scale, or the range of "
    "fewer than 3 runs (runs, not probes, are the unit); the planning table multiplies the same figure.",
]


def _ms(value: Any) -> str:
    v = number(value)
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def latency_table(cells, label: str | None = None) -> Table | None:
    """Per measured cell, a row per latency (TTFT, TPOT, ITL, end to end): the samples behind it, mean, p50, p90 and
    p99 in ms, as `vllm bench serve` prints them; a percentile from too few samples reads 'insufficient (n=40)'
    beside its figure (measure.figures.tails)."""
    rows = [c for c in records(cells) if not traits_of(c.get("kind")).derived
            and any(number(c.get(f"{n}_p50_ms")) is not None for n in ("ttft", "e2e"))]
    if not rows:
        return None
    table = Table(([label.capitalize()] if label else []) + ["Cell", "Latency (ms)", "n", "mean", "p50", "p90",
                                                             "p99"], title="Latency percentiles per cell")
    names = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL (chunk gaps)", "e2e": "end to end"}
    for cell in _rows(rows, ["order"]) if label else rows:
        shown = [n for n in names if number(cell.get(f"{n}_p50_ms")) is not None]
        for i, name in enumerate(shown):
            first = ([cell[label]] if label else []) + [cell["cell_id"]] if i == 0 else [""] * (2 if label else 1)
            count = number(cell.get(f"{name}_n"))
            shown = [tail_marked(_ms(cell.get(f"{name}_{q}_ms")), cell, f"{name}_{q}_ms") for q in ("p50", "p90", "p99")]
            table.add(first + [names[name], "-" if count is None else int(count), _ms(cell.get(f"{name}_mean_ms"))]
                      + shown, "" if cell.get("valid") else "invalid")
    return table


def throughput_table(cells, label: str | None = None) -> Table | None:
    """Per measured cell: successful requests, requests/s, output and total (prompt + output) tokens/s."""
    rows = [c for c in records(cells) if not traits_of(c.get("kind")).derived and number(c.get("request_rps")) is not None]
    if not rows:
        return None
    table = Table(([label.capitalize()] if label else []) + ["Cell", "Requests", "Requests/s", "Output tok/s",
                                                             "Total tok/s"], title="Throughput per cell")
    for cell in _rows(rows, ["order"]) if label else rows:
        table.add(([cell[label]] if label else []) + [
            cell["cell_id"], int(number(cell.get("requests")) or 0), fmt(cell.get("request_rps"), ".2f"),
            fmt(cell.get("output_tok_s"), ".1f"), fmt(cell.get("total_tok_s"), ".0f")],
            "" if cell.get("valid") else "invalid")
    return table


def objectives_text(cell: dict) -> str:
    """The objectives a cell's run was held to ('TTFT <= 1 s, TPOT <= 100 ms for 90% of requests'), '-' without."""
    from ..config.load import ServiceObjectives

    ttft, tpot, e2e = (number(cell.get(f"slo_{k}")) for k in ("ttft_s", "tpot_s", "e2e_s"))
    if ttft is None and tpot is None and e2e is None:
        return "-"
    target = number(cell.get("slo_target"))
    # a run recorded without a target was held to the objectives' default attainment
    attainment = {} if target is None else {"attainment": target}
    return ServiceObjectives(ttft_s=ttft, tpot_s=tpot, e2e_s=e2e, **attainment).describe()


def load_table(cells, label: str | None = None) -> Table | None:
    """Open-loop cells (fixed rates and capacity probes): offered against achieved, and the objectives' share."""
    rows = [c for c in records(cells) if traits_of(c.get("kind")).open_loop]
    if not rows:
        return None
    table = Table(([label.capitalize()] if label else []) + [
        "Cell", "Offered req/s", "Achieved req/s", "Met objectives [95%]", "Goodput req/s", "Held", "Check"],
        title="Open-loop load against the objectives")
    for cell in _rows(rows, ["order", "offered_rps"] if label else ["offered_rps"]):
        share = number(cell.get("slo_attainment"))
        interval = "-" if share is None else (f"{share:.0%} [{fmt(cell.get('slo_attainment_low'), '.0%')}, "
                                              f"{fmt(cell.get('slo_attainment_high'), '.0%')}]")
        table.add(([cell[label]] if label else []) + [
            cell["cell_id"], fmt(cell.get("offered_rps"), ".3g"), fmt(cell.get("achieved_rps"), ".2f"), interval,
            fmt(cell.get("goodput_rps"), ".2f"), _held(cell), cell_check(cell)], "" if cell.get("valid") else "invalid")
    return table


def _held(cell: dict) -> str:
    """Whether the objectives held, said only of a cell that counted
    (measure.kinds.capacity.search.probe_counted): a probe thrown out held nothing; one whose stalled reads were
    dropped says how many."""
    from ..measure.kinds.capacity.search import probe_counted

    met = cell.get("slo_met")
    if met is None or met != met:
        return "-"
    if not probe_counted(cell):
        return "not counted"
    dropped = int(number(cell.get("slo_dropped_requests")) or 0)
    return ("yes" if met else "no") + (f" ({dropped} stalled request{'s' if dropped != 1 else ''} dropped)"
                                       if dropped else "")


def capacity_text(cell: dict) -> str:
    """'holds 11.8 requests/s [11.1, 12.4] at TTFT <= 2 s for 90% of requests (9 probes)'."""
    from ..measure.kinds.capacity.search import describe_capacity

    return describe_capacity(cell, objectives_text(cell))


def capacity_table(cells, label: str | None = None) -> Table | None:
    """Each run's capacity, its interval from the probes, and the objectives it was held under."""
    rows = [c for c in records(cells) if c.get("kind") == measured_by("capacity_rps")]
    if not rows:
        return None
    table = Table(([label.capitalize()] if label else []) + [
        "Capacity req/s", "Interval (probes)", "Objectives", "Probes", "Check"], title="Capacity under the objectives")
    for cell in _rows(rows, ["order"]) if label else rows:
        low, high = fmt(cell.get("capacity_low_rps"), ".3g"), fmt(cell.get("capacity_high_rps"), ".3g")
        notes = ("; a cliff above it" if cell.get("capacity_cliff") else "") + \
            ("; client-limited: a lower bound" if cell.get("capacity_client_limited") else "")
        table.add(([cell[label]] if label else []) + [
            fmt(cell.get("capacity_rps"), ".3g") + notes, f"[{low}, {high}]", objectives_text(cell),
            int(number(cell.get("capacity_probes")) or 0), cell_check(cell)], "" if cell.get("valid") else "invalid")
    return table


def capacity_groups(cells, label: str = "candidate") -> dict[tuple, list[float | None]]:
    """(name, objectives) -> each valid run's capacity (None: held at no probed rate): what every capacity figure
    over runs (the capacity table, the planning table, the chart's mean) is estimated from."""
    groups: dict[tuple, list[float | None]] = {}
    for cell in records(cells):
        if cell.get("kind") == measured_by("capacity_rps") and cell.get("valid"):
            groups.setdefault((cell.get(label), objectives_text(cell)), []).append(number(cell.get("capacity_rps")))
    return groups


def capacity_estimates(cells, label: str = "candidate") -> Table | None:
    """Per candidate: its capacity over its valid runs (estimate_text: the geometric mean with a 95% interval on the
    log scale, or the range of two runs), the runs' own and the objectives (a candidate whose runs were held to
    different objectives gets a row per objective)."""
    groups = capacity_groups(cells, label)
    if not groups:
        return None
    table = Table([label.capitalize(), "Objectives", "Runs", "Capacity req/s (over runs)", "Runs' capacities"],
                  title=f"Capacity under the objectives ({ESTIMATE_WORDS})")
    for (name, objectives), values in groups.items():
        found = [v for v in values if v is not None]
        table.add([name, objectives, len(values), estimate_text(found, ".3g") if found else "held at no probed rate",
                   ", ".join(f"{v:.3g}" for v in found) or "-"])
    return table


def capacity_line(cells) -> str | None:
    """One sentence per candidate for listings and comparisons: 'baseline holds 8.9 requests/s [7.1, 10.6] over 2
    runs at TTFT <= 1 s ...'; None where no capacity was searched."""
    table = capacity_estimates(cells)
    if table is None:
        return None
    return "; ".join(f"{row.values[0]} holds {row.values[3]} requests/s over {row.values[2]} run(s) at {row.values[1]}"
                     for row in table.rows)


def capacity_cells(runs: dict[str, list], label: str = "candidate") -> list[dict]:
    """The capacity cells of runs grouped under names (`label` holds the name), each with its run's objectives."""
    from .figures import run_context

    out = []
    for name, records_ in runs.items():
        for record in records_:
            cells = record.table("cells")
            if cells is None or cells.empty or "kind" not in cells:
                continue
            context = run_context(record)
            out += [{**row, **context, label: name, "run_id": record.run_id}
                    for row in frame_records(cells[cells["kind"] == measured_by("capacity_rps")])]
    return out


def cell_tables(cells, label: str | None = None) -> list[Table]:
    """Every table of a run's (or runs') cells, in the order a report prints them."""
    rows = records(cells)
    extra = [load_table(rows, label), capacity_table(rows, label), latency_table(rows, label),
             throughput_table(rows, label), replica_table(rows, label)]
    return kind_tables(rows, label) + [t for t in extra if t is not None] + under_load_tables(rows, label)
