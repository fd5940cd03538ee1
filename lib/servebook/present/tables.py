"""The one table builder: every figure of a cell is formatted here, for terminal, notebook and site alike."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..config.claims import Verification
from ..measure.figures.tails import Tail, insufficient_tail, percentile_of
from ..util.frames import frame_records
from ..util.render import Style, Table
from .claims import claim_text
from .kinds import (
    DECODE_DEFINITIONS,
    GAP_NOTE,
    PREFILL_DEFINITIONS,
    PRESENT,
    REUSE_DEFINITIONS,
    WAVE_DEFINITIONS,
    Column,
    RunTable,
    Section,
    compared_figures,
    summarised,
)

__all__ = ["DECODE_DEFINITIONS", "ESTIMATE_WORDS", "GAP_NOTE", "PREFILL_DEFINITIONS", "REUSE_DEFINITIONS",
           "WAVE_DEFINITIONS", "cell_check", "estimate_cell", "estimate_tables", "estimate_text", "fit_table", "fmt",
           "kind_tables", "memory_table", "number", "records", "run_tables", "section_definitions", "side_by_side",
           "tail_marked", "thinnest", "change_cell", "verification_table", "VERDICT_MODEL"]

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
        return [] if cells.empty else frame_records(cells)
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


def _present(rows: list[dict], column: str) -> bool:
    """Whether some row has a value in `column` (text counts; None and NaN do not)."""
    return any(isinstance(v, str) or number(v) is not None for v in (row.get(column) for row in rows))


def _shown(columns: tuple[Column, ...], rows: list[dict]) -> list[Column]:
    """The columns a table of `rows` shows: the conditional ones only where the figure they go with is present."""
    return [c for c in columns if c.shown_with is None or _present(rows, c.shown_with)]


def section_definitions(section: Section, cells, kind: str) -> list[str]:
    """A kind's definitions, with those of figures only some runs have where its cells have them."""
    rows = _of_kind(cells, kind)
    return section.definitions + [text for column, text in section.when_present if _present(rows, column)]


def tail_marked(text: str, cell: dict, column: str) -> str:
    """A figure as shown, with 'insufficient (n=40)' beside it where it is a percentile read from fewer samples than
    its confidence needs (measure.figures.tails: 662 for a p99 at 99%)."""
    tail = insufficient_tail(cell, column)
    return text if tail is None or text == "-" else f"{text} {tail.words()}"


def thinnest(cells: list[dict], column: str) -> Tail | None:
    """The fewest-sampled insufficient tail of `column` among cells (None: none is insufficient)."""
    found = [t for t in (insufficient_tail(c, column) for c in cells) if t is not None]
    return min(found, key=lambda t: t.n, default=None)


def _figure(cell: dict, column: Column) -> Any:
    if column.format == "check":
        return cell_check(cell)
    if column.format == "int":
        value = number(cell.get(column.column))
        return "-" if value is None else int(value)
    if column.format == "text":
        word = cell.get(column.column)
        return word if isinstance(word, str) and word else "-"
    return tail_marked(fmt(cell.get(column.column), column.format, column.scale, column.suffix), cell, column.column)


def run_tables(cells, spec: RunTable, kind: str, label: str | None = None) -> list[Table]:
    """A kind's cells as its present entry lays them out (present/kinds.py): one row per cell, one table per prompt
    category where it says so, and the candidate first when `label` names a column that tells runs apart."""
    tables = []
    groups = _by(_of_kind(cells, kind), "category") if spec.by_category else {None: _of_kind(cells, kind)}
    for category, group in groups.items():
        if not group:
            continue
        columns = _shown(spec.columns, group)
        table = Table(([label.capitalize()] if label else []) + [c.title for c in columns],
                      title=spec.title.format(category=category))
        for cell in _rows(group, ["order", *spec.sort] if label else list(spec.sort)):
            table.add(([cell[label]] if label else []) + [_figure(cell, c) for c in columns],
                      "" if cell["valid"] else "invalid")
        tables.append(table)
    return tables


def kind_tables(cells, label: str | None = None) -> list[Table]:
    """Every kind's run tables (those the present registry lays out), in the registry's order."""
    rows = records(cells)
    return [table for kind, entry in PRESENT.items() if entry.table
            for table in run_tables(rows, entry.table, kind, label)]


def side_by_side(cells: pd.DataFrame, labels: list[str], floors: dict | None = None) -> list[Table]:
    """One table per metric: a row per cell, a column per candidate (cells carry a `label` column). Given `floors`
    ((cell id, metric) -> verdicts.DeltaFloor of the first label's configuration), each later run's change from
    the first stands beside its figure, dim and marked ~ where it lies within the noise floor."""
    tables: list[Table] = []
    if cells.empty:
        return tables
    for figure in compared_figures():
        metric, kind, spec, scale = figure.metric, figure.kind, figure.format, figure.scale
        subset = cells[cells["kind"] == kind]
        if subset.empty or metric not in subset or subset[metric].isna().all():
            continue  # runs recorded before the figure existed (or a plan that does not measure it) have none
        pivot = subset.pivot_table(index="cell_id", columns="label", values=metric, aggfunc="first", sort=False)
        columns = [label for label in labels if label in pivot.columns]
        # a percentile's samples beside it, so that a thin tail is marked here as in every other table
        counted = percentile_of(metric)
        counts = subset.pivot_table(index="cell_id", columns="label", values=counted[1], aggfunc="first", sort=False) \
            if counted and counted[1] in subset and subset[counted[1]].notna().any() else None
        against = floors is not None and bool(columns) and columns[0] == labels[0]  # the reference has it
        heads = [h for i, label in enumerate(columns) for h in ([label, f"{label}: change"] if against and i else [label])]
        table = Table(["cell"] + heads, title=figure.title)
        for cell_id, row in pivot[columns].iterrows():
            values: list = [cell_id]
            styles: list[Style] = [""]
            for i, (label, v) in enumerate(zip(columns, row.values, strict=True)):
                values.append(tail_marked(fmt(v, spec, scale), {metric: v, **(
                    _count(counts, counted[1], cell_id, label) if counted else {})}, metric))
                styles.append("")
                if against and i:
                    text, style = change_cell(row.values[0], v, (floors or {}).get((cell_id, metric)))
                    values.append(text)
                    styles.append(style)
            table.add(values, styles=styles if any(styles) else None)
        tables.append(table)
    return tables


def change_cell(reference: Any, figure: Any, floor: Any = None) -> tuple[str, Style]:
    """A run's change from the reference's figure, '+5.2%'; '~+1.1%' and dim where it lies within the noise floor
    (a verdicts.DeltaFloor), which the site's compare page greys too."""
    from ..verdicts.noise import change_pct

    x, y = number(reference), number(figure)
    pct = change_pct(x, y)
    if pct is None or x is None or y is None:
        return "-", ""
    if floor is not None and floor.within(x, y):
        return f"~{pct:+.1f}%", "dim"
    return f"{pct:+.1f}%", ""


#: how tables over runs name their estimate (estimates.Spread), in their titles
ESTIMATE_WORDS = "geometric mean of runs, 95% interval on the log scale; range of fewer than 3 runs"
#: the one line a study's page and report say of the verdicts' model (estimates.model), beside the tables over runs
VERDICT_MODEL = ("A verdict compares a candidate with the baseline within the interleaving rounds and machines their "
                 "runs share (blocks), on the log scale, with the between-run variance pooled over every candidate "
                 "of the study: it does not compare per-candidate intervals, which may overlap where the verdict "
                 "tells two candidates apart.")


def _count(counts: pd.DataFrame | None, column: str, cell_id: Any, label: str) -> dict[str, Any]:
    """{the count column: the samples} of one label's cell in a pivot of counts; {} where none was recorded."""
    if counts is None or label not in counts.columns or cell_id not in counts.index:
        return {}
    return {column: counts.at[cell_id, label]}


def estimate_text(values: list, spec: str, scale: float = 1.0) -> str:
    """'412.3 [398.1, 426.5]': the geometric mean over runs with its 95% interval on the log scale, which a rate
    or a time cannot cross zero with; '412.3 range [398.1, 426.5]' from two runs; one run is just its figure
    (estimates.Spread, which the charts' error bars and the verdicts' figures are too)."""
    from ..estimates import Spread

    figures = [v * scale for v in (number(x) for x in values) if v is not None]
    return Spread.of(figures).text(spec) if figures else "-"


def estimate_cell(cells: list[dict], column: Column) -> str:
    """A column's estimate over runs' cells, with 'insufficient (n=40)' beside it where a run's percentile rests on
    too few samples (the fewest such run's count)."""
    text = estimate_text([c.get(column.column) for c in cells], column.format, column.scale)
    tail = thinnest(cells, column.column)
    return text if tail is None or text == "-" else f"{text} {tail.words()}"


def estimate_tables(cells: pd.DataFrame, label: str = "candidate") -> list[Table]:
    """Per category (and for cold prefill): each candidate's figure over its runs (estimate_text), valid cells only.
    Runs are the unit: a cell's figure in each run is one observation."""
    if cells.empty or "kind" not in cells:
        return []
    valid = cells[cells["valid"].astype(bool)]
    tables = []
    for kind, entry in summarised():
        spec = entry.estimates
        if spec is None:
            continue
        part = valid[valid["kind"] == kind]
        for category, group in (part.groupby("category", sort=False) if spec.by_category else [(None, part)]):
            if group.empty:
                continue
            columns = [c for c in _shown(spec.columns, records(group)) if c.column in group]
            table = Table([label.capitalize(), spec.key_title, "Runs"] + [c.title for c in columns],
                          title=spec.title.format(category=category) + f" ({ESTIMATE_WORDS})")
            order = list(dict.fromkeys(group[label]))
            for name in order:
                mine = group[group[label] == name]
                for at, rows in mine.groupby(spec.key, sort=True):
                    table.add([name, int(at), len(rows)] + [estimate_cell(records(rows), c) for c in columns])
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
