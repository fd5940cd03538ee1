"""The catalogue of cells.parquet's columns (config.columns, issue 54 item 3): every column a cell writes has
exactly one entry, every entry is a column some cell writes, and the readers (judged metrics, side-effect figures,
the tables, the metrics pages) name only catalogued columns."""

import json
import re
import typing
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq

from servebook.config.columns import CATALOGUE, COLUMNS, OBSERVERS, column
from servebook.config.figures import FIGURES
from servebook.config.metrics import METRICS
from servebook.measure.cells import CellSummary, summarize_cell
from servebook.measure.kinds import CellSpec, kinds
from servebook.measure.kinds.agents.session_figures import agents_figures
from servebook.measure.kinds.capacity.search import capacity_of
from servebook.measure.kinds.replay.blocks import replay_figures
from servebook.measure.observers.reconcile import Reconciliation
from servebook.present.kinds import PRESENT
from tests.helpers.records import request_record

REPO = Path(__file__).resolve().parents[3]
_DTYPES = {int: "int", float: "float", str: "str", bool: "bool"}


def summarised_rows() -> dict[str, set[str]]:
    """The columns of a cell of each registered kind that sends (its own figures among every cell's), summarised
    from two requests: a kind registered later is read the same way."""
    rows = {}
    for kind in kinds():
        if not kind.derived:
            spec = CellSpec(f"{kind.name}-1", kind.name, "prose", 2, 2, 4, 64)
            sent = [request_record(i, cell_id=spec.cell_id, concurrency=2, tokens=4, t_send=0.1 * i,
                                   t_first=0.5 + 0.1 * i, t_last=1.0 + 0.1 * i) for i in range(2)]
            rows[kind.name] = set(summarize_cell(spec, sent, Reconciliation("ok")))
    return rows


def written_columns() -> set[str]:
    """Every column a cell writes: the row every kind fills (CellSummary), each kind's summarised row, and the
    figures of the kinds whose rows carry columns of their own from their measured window or their probes (trace
    replay, the capacity row), read from their figure functions."""
    own = {*agents_figures([]), *replay_figures([], [], SimpleNamespace(block_tokens=512)), *capacity_of([], 0.9)}
    return set(CellSummary.__annotations__).union(own, *summarised_rows().values())


def unlisted(columns: set[str]) -> list[str]:
    """The columns the catalogue has no entry for, by name."""
    return sorted(columns - set(COLUMNS))


def test_every_written_column_has_an_entry_and_every_entry_is_written():
    written = written_columns()
    assert not unlisted(written), f"columns without an entry in config/columns/: {unlisted(written)}"
    assert not sorted(set(COLUMNS) - written), f"entries no cell writes: {sorted(set(COLUMNS) - written)}"


def test_every_kind_writes_catalogued_columns():
    rows = summarised_rows()
    assert {"decode", "agents", "wave"} <= set(rows) and "sessions" in rows["agents"]
    for kind, columns in rows.items():
        assert not unlisted(columns), f"{kind} cells write columns without an entry: {unlisted(columns)}"


def test_a_new_column_without_an_entry_is_named():
    assert unlisted(written_columns() | {"kv_blocks_freed"}) == ["kv_blocks_freed"]


def test_each_column_is_declared_once():
    twice = [name for name, n in Counter(c.name for c in CATALOGUE).items() if n > 1]
    assert not twice, f"declared more than once: {twice}"


def test_the_types_are_the_rows():
    """A CellSummary field's type (None aside) is its entry's dtype."""
    for name, hint in typing.get_type_hints(CellSummary).items():
        base = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        assert _DTYPES[base[0]] == COLUMNS[name].dtype, name


def test_every_recorded_cells_parquet_names_catalogued_columns():
    """The columns of the recorded journals and the recorded shape of a run of every kind are all catalogued."""
    shape = json.loads((REPO / "tests/integration/recorded/simulated-cells-shape.json").read_text())
    recorded = set(shape["columns"])
    for path in (REPO / "tests").rglob("cells.parquet"):
        recorded |= set(pq.read_schema(path).names)
    assert len(recorded) > 100
    assert not unlisted(recorded), unlisted(recorded)


def test_each_column_is_written_by_a_kind_or_an_observer():
    writers = {kind.name for kind in kinds()} | set(OBSERVERS)
    for entry in CATALOGUE:
        assert entry.written_by and set(entry.written_by) <= writers, (entry.name, entry.written_by)
        assert entry.definition.endswith(".") and entry.title, entry.name


def test_the_readers_name_catalogued_columns_in_its_words():
    for metric in METRICS.values():
        assert (metric.words, metric.unit) == (column(metric.name).words, column(metric.name).unit)
    assert all(figure.column in COLUMNS for figure in FIGURES)
    for entry in PRESENT.values():
        tables = [t for t in (entry.table, entry.estimates) if t is not None]
        for shown in (c for t in tables for c in t.columns if c.format != "check"):
            assert shown.column in COLUMNS, shown.column
        assert all(name in COLUMNS for _, name, _, _ in entry.compared)


def _table_columns(text: str) -> set[str]:
    """The columns the tables of a page name in their "column(s)" cells, `ttft_{mean,p50}_ms` spelled out."""
    names: set[str] = set()
    header: list[str] = []
    for line in text.splitlines():
        if not line.startswith("|"):
            header = []
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not header:
            header = cells
        elif header[-1] in ("column", "columns") and not set(cells[-1]) <= set("-"):
            for name in re.findall(r"`([^`]+)`", cells[-1]):
                braces = re.fullmatch(r"(\w*)\{([\w,]+)\}(\w*)", name)
                names |= {f"{braces[1]}{part}{braces[3]}" for part in braces[2].split(",")} if braces else {name}
    return names


def test_the_metrics_page_names_catalogued_columns():
    named = _table_columns((REPO / "docs" / "metrics.md").read_text(encoding="utf-8"))
    assert {"ttft_p99_ms", "e2e_n", "draft_source", "request_rps"} <= named
    assert not unlisted(named), f"docs/metrics.md names columns without an entry: {unlisted(named)}"
    reference = (REPO / "docs" / "reference" / "metrics.md").read_text(encoding="utf-8")
    assert set(re.findall(r"^\| `(\w+)` \| (?:int|float|str|bool) \|", reference, re.M)) == set(COLUMNS)
