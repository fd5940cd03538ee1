"""Filtering and sorting the journal's runs by what the index holds, by knob and by metric (`journal ls --where
knobs.chunk_size>=512 --sort aggregate_tok_s:desc`).

Every field is typed before a run is read: an index column, `knobs.NAME` (typed by the candidate model, so
`knobs.chunk_size=abc` is an error, not zero runs), or a metric (`aggregate_tok_s`: the run's best valid cell, the
highest rate or the lowest latency; `aggregate_tok_s@decode-prose-c4`: that cell). A misspelled field or value
names the close ones, because a filter that silently matches nothing reads as "no such runs".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args

import pandas as pd
from pydantic import BaseModel, TypeAdapter, ValidationError

from ..config.knobs import KNOB_MODELS, Knobs
from ..config.metrics import LOWER_IS_BETTER, Metric
from ..util.errors import InputError
from ..util.suggest import close_names
from .record import RunRecord

STATUSES = ("completed", "failed", "incomplete", "interrupted", "damaged", "degraded")
#: index columns one may filter and sort on, and their types
COLUMNS: dict[str, type] = {"status": str, "study": str, "candidate": str, "candidate_id": str, "plan_id": str,
                            "engine": str, "started_at": str, "cells": int, "valid_cells": int, "failure": str,
                            "verdict": str, "engine_version": str, "machine": str, "image_digest": str,
                            "driver": str, "tags": str, "archived": bool}
METRICS = tuple(get_args(Metric))
_OPERATORS = ("!=", ">=", "<=", "=", ">", "<")
_CONDITION = re.compile(r"^\s*([A-Za-z0-9_.@:=+,-]+?)\s*(!=|>=|<=|=|>|<)\s*(.*?)\s*$")


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: Any

    def holds(self, found: Any) -> bool:
        if self.field == "tags":  # a set: = means "has the tag", != "has it not"
            tags = set(str(found).split(",")) if found else set()
            return (self.value in tags) == (self.op == "=")
        if _missing(found):
            return self.op == "!="
        try:
            return {"=": found == self.value, "!=": found != self.value, ">": found > self.value,
                    ">=": found >= self.value, "<": found < self.value, "<=": found <= self.value}[self.op]
        except TypeError:
            return False


def _close(word: str, choices: list[str]) -> str:
    """The close names, said as every command says them (util.suggest)."""
    near = close_names(word, choices)
    return "; did you mean " + " or ".join(repr(n) for n in near) + "?" if near else ""


def _knob_models() -> list[type[BaseModel]]:
    """Every engine's knob model: a journal holds runs of several engines, each with knobs of its own."""
    from .. import engines  # noqa: F401  (each engine registers its knob model)

    return [*KNOB_MODELS.values()] or [Knobs]


def _fields_of(models: list[type[BaseModel]]) -> dict[str, Any]:
    """The fields of any of `models` (the first model that has a name types it)."""
    fields: dict[str, Any] = {}
    for model in models:
        fields.update({k: v for k, v in model.model_fields.items() if k not in fields})
    return fields


def _knob_type(path: str) -> Any:
    """The annotation of knobs.A(.B) in any engine's knobs, walking nested models; an unknown name names the known
    ones."""
    models = _knob_models()
    parts = path.split(".")[1:]
    annotation: Any = None
    for i, part in enumerate(parts):
        fields = _fields_of(models)
        if part not in fields:
            known = [".".join(["knobs", *parts[:i], f]) for f in fields]
            raise InputError(f"{path!r}: no such knob{_close('.'.join(['knobs', *parts[:i + 1]]), known)} "
                             f"(knobs: {', '.join(known)})")
        annotation = fields[part].annotation
        nested = [a for m in models if part in m.model_fields
                  for a in (m.model_fields[part].annotation, *get_args(m.model_fields[part].annotation))
                  if isinstance(a, type) and issubclass(a, BaseModel)]
        if nested:
            models = nested
        elif i < len(parts) - 1:
            raise InputError(f"{path!r}: knobs.{'.'.join(parts[:i + 1])} has no fields")
    if annotation is None:
        raise InputError(f"{path!r}: name a knob, e.g. knobs.chunk_size")
    return annotation


def field_kind(name: str) -> str:
    """column, knob or metric; anything else is an error naming the close fields."""
    if name in COLUMNS:
        return "column"
    if name.startswith("knobs."):
        _knob_type(name)
        return "knob"
    metric, _, cell = name.partition("@")
    if metric in METRICS and (cell or "@" not in name):
        return "metric"
    fields = [*COLUMNS, *METRICS, *(f"knobs.{k}" for k in _fields_of(_knob_models()))]
    raise InputError(f"{name!r} is no field of a run{_close(metric, fields)} (fields: the index's {', '.join(COLUMNS)}; "
                     f"knobs.NAME; a metric {', '.join(METRICS)}, optionally METRIC@CELL_ID)")


def typed(name: str, text: str, studies: list[str]) -> Any:
    kind = field_kind(name)
    if kind == "knob":
        try:
            return TypeAdapter(_knob_type(name)).validate_python(None if text in ("none", "null") else text)
        except ValidationError as error:
            raise InputError(f"--where {name}={text}: {error.errors()[0]['msg']}") from None
    if kind == "metric" or COLUMNS[name] is int:
        try:
            return float(text)
        except ValueError:
            raise InputError(f"--where {name}={text}: {name} is a number") from None
    if COLUMNS[name] is bool:
        if text.lower() not in ("true", "false", "yes", "no"):
            raise InputError(f"--where {name}={text}: write {name}=true or {name}=false")
        return text.lower() in ("true", "yes")
    if name == "status" and text not in STATUSES:
        raise InputError(f"--where status={text}: no such status{_close(text, list(STATUSES))} "
                         f"(statuses: {', '.join(STATUSES)})")
    if name == "study" and text not in studies:
        raise InputError(f"--where study={text}: no run of that study in this journal{_close(text, studies)} "
                         f"(studies: {', '.join(studies) or 'none'})")
    return text


def parse_where(text: str, studies: list[str]) -> Condition:
    match = _CONDITION.match(text)
    if not match:
        raise InputError(f"--where {text!r}: write FIELD OP VALUE with OP one of {' '.join(_OPERATORS)}, e.g. "
                         "knobs.chunk_size=512 or aggregate_tok_s>100")
    name, op, value = match.groups()
    if name == "tags" and op not in ("=", "!="):
        raise InputError(f"--where {text!r}: tags take = (has the tag) or != (has it not)")
    return Condition(name, op, typed(name, value, studies))


def parse_sort(text: str) -> tuple[str, bool]:
    """FIELD, FIELD:asc or FIELD:desc -> (field, descending)."""
    name, _, order = text.partition(":")
    if order not in ("", "asc", "desc"):
        raise InputError(f"--sort {text!r}: write FIELD, FIELD:asc or FIELD:desc")
    field_kind(name)
    return name, order == "desc"


def _metric_value(record: RunRecord, name: str) -> float | None:
    metric, _, cell = name.partition("@")
    cells = record.table("cells") if record.status == "completed" else None
    if cells is None or metric not in cells.columns:
        return None
    valid = cells[cells["valid"].astype(bool)]
    if cell:
        valid = valid[valid["cell_id"] == cell]
    values = pd.to_numeric(valid[metric], errors="coerce").dropna()
    if values.empty:
        return None
    return float(values.min() if metric in LOWER_IS_BETTER else values.max())


def _knob_value(record: RunRecord, name: str) -> Any:
    value: Any = (record.identity.candidate or {}).get("knobs") or {}
    for part in name.split(".")[1:]:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def field_values(frame: pd.DataFrame, name: str, read: Callable[[str], RunRecord]) -> pd.Series:
    """`name` for every row of `frame` (an index frame), reading a run only for knobs and metrics."""
    kind = field_kind(name)
    if kind == "column":
        column = frame[name]
        return column.notna() if COLUMNS[name] is bool else column
    fetch = _knob_value if kind == "knob" else _metric_value
    return pd.Series([fetch(read(run_id), name) for run_id in frame["run_id"]], index=frame.index, dtype=object)


def browse(frame: pd.DataFrame, read: Callable[[str], RunRecord], where: list[str],
           sort: str | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The rows of `frame` that meet every condition, sorted (runs without the field last), and the knob and
    metric fields used, added as columns for the listing to show."""
    studies = sorted({str(s) for s in frame["study"].dropna()})
    conditions = [parse_where(text, studies) for text in where]
    ordering = parse_sort(sort) if sort else None
    shown = list(dict.fromkeys([c.field for c in conditions] + ([ordering[0]] if ordering else [])))
    chosen = frame.copy()
    for name in shown:
        if name not in COLUMNS:
            chosen[name] = field_values(chosen, name, read)
    for condition in conditions:
        values = field_values(chosen, condition.field, read) if condition.field in COLUMNS else chosen[condition.field]
        chosen = chosen[[condition.holds(v) for v in values]]
    if ordering:
        name, descending = ordering
        keys = list(field_values(chosen, name, read) if name in COLUMNS else chosen[name])
        present = sorted((i for i, k in enumerate(keys) if not _missing(k)), key=lambda i: _key(keys[i]),
                         reverse=descending)
        chosen = chosen.iloc[present + [i for i, k in enumerate(keys) if _missing(k)]]
    return chosen, [name for name in shown if name not in COLUMNS]


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _key(value: Any) -> tuple[int, Any]:
    # numbers before text, so a column of figures sorts as figures even if one run wrote text there
    return (0, value) if isinstance(value, (int, float)) else (1, str(value))
