"""Verdicts of a study's runs: comparisons over runs (comparisons.py), which cells are evidence (evidence.py),
the noise floor (noise.py) and the verdict itself (judge.py)."""

from .comparisons import Comparison, compare_rule, comparison_of, describe, figures, select_cells
from .evidence import baseline_evidence, cell_codes, undisturbed, valid_cells
from .gate import GATE_EXIT_CODES, GATE_OUTCOMES, GateResult, deciding, gate, gate_outcome, parse_fail_on
from .history import CellSeries, History, SliceComparison, compare_slices, default_rules, history
from .judge import Judged, judge, judge_run, judge_runs, settle, study_runs
from .noise import DeltaFloor, NoiseFloor, change_pct, delta_floors, noise_floor, noise_rows
from .verdict import Outcome, Verdict

__all__ = ["CellSeries", "History", "SliceComparison", "compare_slices", "default_rules", "history",
           "GATE_EXIT_CODES", "GATE_OUTCOMES", "GateResult", "deciding", "gate", "gate_outcome", "parse_fail_on",
           "Comparison", "DeltaFloor", "Judged", "NoiseFloor", "Outcome", "Verdict", "baseline_evidence", "cell_codes",
           "change_pct", "compare_rule", "comparison_of", "delta_floors", "describe", "figures", "judge", "judge_run",
           "judge_runs", "noise_floor", "noise_rows", "select_cells", "settle", "study_runs", "undisturbed", "valid_cells"]
