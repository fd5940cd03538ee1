"""A run's latency figures are computed when it is sealed and stored in its cells.parquet (issue 52): a writer that
wrote cells without them gets them once, from its requests and chunks; every other column passes through as it was
written; cells that carry them are not rewritten."""

import pandas as pd
import pyarrow.parquet as pq

from servebook.journal import Journal
from servebook.journal.manifest import Manifest
from servebook.measure.figures.latency import LATENCY_COLUMNS
from servebook.measure.figures.latency_tables import with_latency

CELLS = [{"cell_id": "decode-prose-c1", "kind": "decode", "wall_s": 2.0, "valid": True, "decode_extra": 3,
          "note": "first"},
         {"cell_id": "decode-prose-c2", "kind": "decode", "wall_s": 4.0, "valid": True, "decode_extra": None,
          "note": None}]
REQUESTS = pd.DataFrame([
    {"request_id": f"r{i}", "cell_id": f"decode-prose-c{1 + i % 2}", "t_send": i * 0.5, "t_first": i * 0.5 + 0.1 * i,
     "t_last": i * 0.5 + 1.0 + 0.01 * i, "prompt_tokens": 10, "completion_tokens": 8 + i % 3,
     "error": None if i != 3 else "ReadTimeout"} for i in range(9)])
CHUNKS = pd.DataFrame([{"request_id": f"r{i}", "gap_s": 0.01 * (1 + j + i)} for i in range(9) for j in range(3)])


def sealed(tmp_path, cells: list[dict]):
    journal = Journal(tmp_path / "journal")
    writer = journal.start_run("abcdef123456", "run-1")
    writer.write_table("cells", cells)
    writer.write_table("requests", REQUESTS)
    writer.write_table("chunks", CHUNKS)
    path = writer.dir / "cells.parquet"
    written = pq.read_table(path), path.read_bytes(), path.stat().st_mtime_ns
    writer.seal(Manifest.model_validate({"status": "completed", "candidate_id": "abcdef123456", "plan_id": "p",
                                         "summary": {"cells": len(cells), "valid_cells": len(cells)}}))
    return journal.run("run-1"), written


def test_cells_sealed_without_figures_get_them_and_keep_every_other_column(tmp_path):
    record, (written, _, _) = sealed(tmp_path, CELLS)
    stored = pq.read_table(record.table_path("cells"))
    assert stored.column_names == written.column_names + LATENCY_COLUMNS
    assert stored.select(written.column_names).equals(written)  # types and values as the writer wrote them
    expected = with_latency(pd.DataFrame(CELLS), REQUESTS, CHUNKS)
    for column in LATENCY_COLUMNS:
        assert stored.column(column).to_pylist() == [None if v != v else v for v in expected[column]], column
    assert stored.column("ttft_p50_ms").to_pylist()[0] is not None
    assert record.status == "completed" and record.damage is None


def test_cells_that_carry_their_figures_are_not_rewritten(tmp_path):
    cells = [dict(cell, **{column: 1.5 for column in LATENCY_COLUMNS}) for cell in CELLS]
    record, (_, data, mtime) = sealed(tmp_path, cells)
    path = record.table_path("cells")
    assert path.read_bytes() == data and path.stat().st_mtime_ns == mtime
