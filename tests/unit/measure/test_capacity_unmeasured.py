"""A capacity nobody measured (the objectives held at no probed rate) is no number: read back from cells.parquet
it is NaN, and it must be told as 'held at no probed rate', and judged as a finding about the run, whichever side
of the comparison it is on."""

import math

import pandas as pd

from servebook.config import VerdictRules
from servebook.journal import Manifest
from servebook.measure.kinds.capacity.search import describe_capacity
from servebook.verdicts import judge_runs

RULES = VerdictRules(rules=[{"metric": "capacity_rps", "max_regression_pct": 10}])


def capacity_cells(capacity: float | None) -> pd.DataFrame:
    row = {"cell_id": "capacity", "kind": "capacity", "category": "prose", "concurrency": 0, "requests": 60,
           "errors": 0, "capacity_rps": capacity, "capacity_low_rps": None, "capacity_high_rps": None,
           "capacity_cliff": None, "capacity_probes": 7, "capacity_client_limited": False, "reconciliation": "ok",
           "valid": True, "invalid_codes": "", "invalid_reasons": ""}
    # typed as the recorded column is (float64, as pyarrow infers it once any row of the run holds a figure)
    return pd.DataFrame([row]).astype({"capacity_rps": "float64", "capacity_low_rps": "float64",
                                       "capacity_high_rps": "float64"})


def read_back(frame: pd.DataFrame, tmp_path) -> pd.DataFrame:
    frame.to_parquet(tmp_path / "cells.parquet", index=False)
    return pd.read_parquet(tmp_path / "cells.parquet")


def test_a_capacity_read_back_as_nan_is_told_as_none(tmp_path):
    row = read_back(capacity_cells(None), tmp_path).to_dict("records")[0]
    assert math.isnan(row["capacity_rps"])  # what the reader sees: NaN where None was written
    told = describe_capacity(row, "TTFT <= 1 s for 90% of requests")
    assert "nan" not in told and "held at no probed rate" in told and "7 probes" in told


def test_no_capacity_anywhere_rejects_the_baseline_and_the_candidate_alike(tmp_path):
    cells = read_back(capacity_cells(None), tmp_path)
    runs = [(Manifest(status="completed", run_id=f"r{i}"), cells.copy()) for i in range(2)]
    baseline = judge_runs(runs, [], RULES, is_baseline=True)
    candidate = judge_runs(runs, [cells.copy(), cells.copy()], RULES, is_baseline=False)
    for verdict in (baseline, candidate):
        assert verdict.outcome == "rejected"
        assert any("held at no probed rate" in reason for reason in verdict.reasons), verdict.reasons


def test_a_measured_capacity_is_still_judged_on_its_figure(tmp_path):
    base = [read_back(capacity_cells(10.0 + i / 10), tmp_path) for i in range(3)]
    runs = [(Manifest(status="completed", run_id=f"r{i}"), c) for i, c in enumerate(base)]
    assert judge_runs(runs, [], RULES, is_baseline=True).outcome == "accepted"
