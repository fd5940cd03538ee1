"""A recorded run's /metrics as the engine adapters read them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from servebook.engines.counters import Sample, Scrape


def recorded_scrapes(path: Path, cell: str) -> tuple[Scrape, Scrape]:
    """The engine's /metrics before and after one cell, from a run's scrapes.parquet."""
    frame = pd.read_parquet(path)

    def scrape(phase: str) -> Scrape:
        rows = frame[(frame.cell_id == cell) & (frame.phase == phase)]
        return Scrape(float(rows.t.iloc[0]), [Sample(n, tuple(sorted(json.loads(labels).items())), float(value))
                                              for n, labels, value in rows[["name", "labels", "value"]].itertuples(
                                                  index=False)])

    return scrape("before"), scrape("after")
