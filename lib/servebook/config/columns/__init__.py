"""The catalogue of the columns of cells.parquet: each declared once, with its type, unit, title, display format,
one-sentence definition and the cell kind or observer that writes it.

Judged metrics (config.metrics), side-effect figures (config.figures), the tables and the site (present.kinds) and
the metrics reference (docs/reference/metrics.md) read a column's facts here; tests/unit/config/test_columns.py
fails, naming it, on a column a cell writes that has no entry and on an entry no cell writes. A new column is one
entry in the module of the kind or observer that writes it.
"""

from __future__ import annotations

from .cell import CLOSED_LOOP, EVERY
from .entry import CellColumn, Dtype
from .latency import ITL, PEERS, PROBES, REASONING
from .load import AGENTS, CAPACITY, OBJECTIVES, OPEN_LOOP, REPLAY
from .observers import DRAFTER, GAUGES, GPU, HOST, REALISM, REPLICAS

__all__ = ["CATALOGUE", "COLUMNS", "OBSERVERS", "CellColumn", "Dtype", "column"]

#: the writers of columns that are not cell kinds: every cell's figures and the observers beside them
OBSERVERS: dict[str, str] = {
    "cells": "every cell's figures from its requests (measure.cells)",
    "validity": "the cell's reconciliation and faults (measure.validity, measure.observers.reconcile)",
    "latency": "the peers' latency percentiles and throughputs (measure.figures.latency, measure.figures.tails)",
    "itl": "a decode cell's chunk gaps (measure.figures.itl)",
    "probes": "interference probes beside prefill requests (measure.kinds.prefill.probes)",
    "reasoning": "a reasoning model's thinking and answer phases (measure.figures.reasoning)",
    "objectives": "attainment of the plan's service objectives (measure.openloop)",
    "drafter": "a speculative drafter's evidence (measure.cells)",
    "realism": "what a decode cell's output was like (measure.figures.realism)",
    "host": "the host's CPUs beside the cell (measure.observers.host)",
    "gpu": "the engine's GPUs beside the cell (measure.observers.gpu)",
    "replicas": "several replicas' own counters (measure.observers.replicas)",
    "gauges": "the engine's load gauges during the cell (measure.observers.gauges)",
}

#: every column, in the order of the groups above
CATALOGUE: tuple[CellColumn, ...] = (
    *EVERY, *CLOSED_LOOP, *PEERS, *ITL, *PROBES, *REASONING, *OPEN_LOOP, *OBJECTIVES, *REPLAY, *AGENTS, *CAPACITY,
    *DRAFTER, *REALISM, *HOST, *GPU, *REPLICAS, *GAUGES)
#: each column by its name
COLUMNS: dict[str, CellColumn] = {c.name: c for c in CATALOGUE}


def column(name: str) -> CellColumn:
    """A column's entry; a KeyError names a column the catalogue lacks."""
    try:
        return COLUMNS[name]
    except KeyError:
        raise KeyError(f"{name!r} is no column of cells.parquet in config.columns") from None
