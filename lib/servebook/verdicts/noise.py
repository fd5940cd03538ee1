"""The noise floor: the baseline's own between-run spread per judged cell, the part of it within a run, the runs
its limit needs, and what the runs spent can detect; and the floor of one run's change from a reference run, which
runs compared side by side grey their changes within (DeltaFloor)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial

import pandas as pd

from ..config.rules import VerdictRules
from ..config.study import Study
from ..estimates import Allocation, Block, Estimate, allocate, detectable_change, runs_needed_for
from ..journal import Journal
from ..measure.figures.stats import conversations_se_pct, se_pct
from ..measure.kinds import kind_of
from ..util.frames import frame_records
from .comparisons import blocked_figures
from .evidence import valid_cells
from .machines import machine_of


@dataclass
class NoiseFloor:
    """The baseline's own between-run spread in one cell a rule selects, and what the rule's limit needs."""

    metric: str
    cell_id: str
    runs: int
    #: the spread of one run's figure around its machine's mean, pooled over the machines (machines are blocks of
    #: every verdict: the speed one machine has over another is no noise a comparison within one pays for)
    cv_pct: float | None
    limit_pct: float
    runs_needed: int | None
    #: the smallest change these runs per side would detect (one-sided 5%, 80% power), in percent
    detectable_pct: float | None = None
    #: the spread of a run's figure from its own requests (standard error in percent, averaged over runs): when it
    #: is far below the between-run CV, more requests per launch cannot help, only more launches can
    within_run_pct: float | None = None
    #: the launch-to-launch part of the spread and the cell length that spends machine time best (given the runs'
    #: durations and the requests); None where either is unknown
    allocation: Allocation | None = None
    #: the machines the baseline's runs were measured on
    machines: int = 1
    #: True where no machine holds two runs (a parallel sweep's lanes, one run a boot): `cv_pct` is then the plain
    #: spread across machines, their differences in it, an upper bound on the noise within one
    across_machines: bool = False
    #: the between-run spread the verdicts' model used at this cell (pooled over the study's candidates, rounds and
    #: machines as blocks; the median over the candidates compared), and whether any of them was decided there
    verdict_cv_pct: float | None = None
    verdict_decided: bool = False

    def disagreement(self) -> str | None:
        """Why the floor and the verdict beside it part, where they do: the floor says these runs cannot resolve
        the limit while a verdict decided the cell, or the baseline's runs alone spread far more than the model's
        pooled figure (a run the floor still counts that the verdicts do not weigh alike)."""
        if self.verdict_cv_pct is None or self.cv_pct is None:
            return None
        pooled = f"the verdicts' model puts the spread at {self.verdict_cv_pct:.1f}%, pooled over the study's runs"
        if self.verdict_decided and self.resolvable is False:
            return (f"decided all the same: {pooled} with rounds and machines as blocks; this floor is the "
                    f"baseline's {self.runs} runs alone")
        if self.cv_pct > 2 * self.verdict_cv_pct:
            return f"{pooled}; the baseline's own runs spread more: see its runs' disturbance figures"
        return None

    @property
    def resolvable(self) -> bool | None:
        if self.cv_pct is None:
            return None
        return self.runs_needed is not None and self.runs >= self.runs_needed


def noise_rows(baseline_runs: list[pd.DataFrame], rules: VerdictRules,
               requests: list[pd.DataFrame] | None = None, run_seconds: list[float] | None = None) -> list[NoiseFloor]:
    """Per rule and selected cell: the baseline's between-run CV, the runs per side its limit needs, what the runs
    spent can detect, and (given the runs' request tables) the part of the noise that lies within a run; given
    the runs' durations too, how long the cell should be and how many runs the limit then needs."""
    out = []
    launch_s = statistics.median(run_seconds) if run_seconds else None
    for rule in rules.rules:
        for cell_id, blocked in blocked_figures(baseline_runs, rule).items():
            values = [value for _, value in blocked]
            machines = len({machine_of(block) for block, _ in blocked})
            cv = within_machines_cv(blocked)
            across = cv is None and machines > 1
            if across:
                cv = Estimate.of(values).cv_pct
            within = _recorded_within(baseline_runs, cell_id, rule.metric)
            if within is None and requests:
                within = within_run_se(requests, cell_id, rule.metric)
            cell_s = _cell_seconds(baseline_runs, cell_id)
            allocation = (allocate(cv, within, rule.max_regression_pct, launch_s, cell_s)
                          if cv is not None and within is not None and launch_s and cell_s else None)
            out.append(NoiseFloor(rule.metric, cell_id, len(values), cv, rule.max_regression_pct,
                                  runs_needed_for(rule.max_regression_pct, cv) if cv is not None else None,
                                  detectable_change(cv, len(values)) if cv is not None else None,
                                  within, allocation, machines, across))
    return out


def within_machines_cv(blocked: list[tuple[Block, float]]) -> float | None:
    """The between-run CV of runs around their own machine's mean, pooled over machines (n - machines degrees of
    freedom): on one machine, the plain CV. Pooling the H200's and an H100's runs of the 8B baseline plainly gave 12.8%
    at one request against 0.3% and 1.0% on each (2026-12-06): the machines' difference, which no verdict counts as
    noise, and which asked for 31 runs a side where 2 do."""
    by_machine: dict[str, list[float]] = {}
    for block, value in blocked:
        if math.isfinite(value):
            by_machine.setdefault(machine_of(block), []).append(value)
    if len(by_machine) == 1:
        return Estimate.of(next(iter(by_machine.values()))).cv_pct
    # a machine whose figures average to zero or less has no relative spread: it takes no part, its runs' freedom neither
    kept = [(values, mean) for values in by_machine.values() if (mean := statistics.fmean(values)) > 0]
    squares = sum((v / mean - 1.0) ** 2 for values, mean in kept for v in values)
    freedom = sum(len(values) - 1 for values, _ in kept)
    return 100.0 * (squares / freedom) ** 0.5 if freedom > 0 else None


def _headline(kind: str) -> str | None:
    """The metric whose within-run error a cell records at measurement time (`within_se_pct`): its kind's headline
    figure (measure/kinds/); None for kinds a journal names that this servebook does not know."""
    try:
        return kind_of(kind).headline
    except KeyError:
        return None


def _within_column(kind: str, metric: str) -> str | None:
    """The column where a cell of `kind` records `metric`'s within-run error: `within_se_pct` for its headline, else
    one its kind names (measure/kinds/); None where it records none."""
    if _headline(kind) == metric:
        return "within_se_pct"
    try:
        return getattr(kind_of(kind), "within_columns", {}).get(metric)
    except KeyError:
        return None


def _recorded_within(runs: list[pd.DataFrame], cell_id: str, metric: str) -> float | None:
    """The within-run error the cells recorded themselves (root mean square over runs), where they record one for the
    metric the rule judges; None for journals written before cells recorded it."""
    errors = []
    for cells in runs:
        for row in frame_records(cells[cells["cell_id"] == cell_id]):
            column = _within_column(row["kind"], metric)
            value = row.get(column) if column else None
            if value is not None and pd.notna(value):
                errors.append(float(value))
    return _rms(errors)


def _cell_seconds(runs: list[pd.DataFrame], cell_id: str) -> float | None:
    spans = [float(t) for cells in runs if "wall_s" in cells
             for t in cells.loc[cells["cell_id"] == cell_id, "wall_s"] if pd.notna(t) and t > 0]
    return statistics.median(spans) if spans else None


def _ttft(rows: pd.DataFrame) -> pd.Series:
    return rows["t_first"] - rows["t_send"]


def _decode_rates(rows: pd.DataFrame) -> pd.Series:
    return (rows["completion_tokens"] - 1) / (rows["t_last"] - rows["t_first"])


def _reasoning_per_request(rows: pd.DataFrame, metric: str) -> pd.Series:
    """A reasoning figure per request (measure.transport.client.RequestRecord); empty for requests recorded before
    its columns."""
    needed = {"answer_ttft_s": ("t_first_answer",), "reasoning_tok_s": ("reasoning_tokens", "t_first_reasoning"),
              "answer_tok_s": ("reasoning_tokens", "t_first_answer")}[metric]
    if not set(needed) <= set(rows.columns):
        return pd.Series(dtype=float)
    if metric == "answer_ttft_s":
        return (rows["t_first_answer"] - rows["t_send"]).dropna()
    if metric == "reasoning_tok_s":
        rates = (rows["reasoning_tokens"] - 1) / (rows["t_last_reasoning"] - rows["t_first_reasoning"])
    else:
        answer = rows["completion_tokens"] - rows["reasoning_tokens"]
        rates = (answer - 1) / (rows["t_last"] - rows["t_first_answer"])
    return rates.dropna()


def _next_turn_error(rows: pd.DataFrame) -> float | None:
    """A reuse cell's next turn: its conversations' means (one conversation's turns are no independent draws)."""
    if not {"turn", "conversation"} <= set(rows.columns):
        return None
    later = rows[rows["turn"] > 1]
    return conversations_se_pct(list(zip(later["conversation"], _ttft(later), strict=True)))


def _spread_of(per_request: Callable[[pd.DataFrame], pd.Series]) -> Callable[[pd.DataFrame], float | None]:
    """Per-request values' CV over the square root of their number."""
    return lambda rows: se_pct([float(v) for v in per_request(rows)])


#: each judged metric whose within-run error a run's request table gives, and how; the others (tail percentiles of
#: ITL, capacity, replay, sessions, probes) have none from their requests
REQUEST_ERRORS: dict[str, Callable[[pd.DataFrame], float | None]] = {
    "ttft_s": _spread_of(_ttft), "ttft_p90_s": _spread_of(_ttft),
    "prefill_tok_s": _spread_of(lambda rows: rows["prompt_tokens"] / _ttft(rows)),
    **{metric: _spread_of(_decode_rates) for metric in ("aggregate_tok_s", "steady_tok_s", "per_request_tok_s")},
    **{metric: _spread_of(partial(_reasoning_per_request, metric=metric))
       for metric in ("answer_ttft_s", "reasoning_tok_s", "answer_tok_s")},
    "next_turn_ttft_s": _next_turn_error,
}


def within_run_se(requests: list[pd.DataFrame], cell_id: str, metric: str) -> float | None:
    """The standard error of a run's figure that its own requests explain, in percent of the figure, averaged
    (root mean square) over runs (Kalibera and Jones' within-launch level); None for a metric no request gives."""
    error_of = REQUEST_ERRORS.get(metric)
    if error_of is None:
        return None
    errors = []
    for table in requests:
        rows = table[table["cell_id"] == cell_id]
        if "error" in rows:
            rows = rows[rows["error"].isna()]
        if (error := error_of(rows)) is not None:
            errors.append(error)
    return _rms(errors)


def _rms(errors: list[float]) -> float | None:
    """Errors of several runs together: their root mean square."""
    return (sum(e * e for e in errors) / len(errors)) ** 0.5 if errors else None


def noise_floor(study: Study, journal: Journal, judged: list | None = None) -> list[NoiseFloor]:
    """The study's noise floor, from the baseline's recorded runs under the study's plan; given the study's verdicts
    (`judged`: verdicts.Judged each), without the runs they left out as disturbed outliers and beside the spread
    they used."""
    baseline = next((e for e in study.expand() if e.name == study.verdict.baseline_entry), None)
    if baseline is None:
        return []
    dropped = {run for item in judged or [] for run in item.outlier_runs}
    records = [r for r in journal.find_all(baseline.candidate.id, study.plan.id) if r.run_id not in dropped]
    completed = [r for r in records if r.status == "completed" and r.manifest is not None]
    cells = valid_cells(records)
    seconds = [t for t in (run_seconds(r.manifest.started_at, r.manifest.finished_at)
                           for r in completed if r.manifest) if t is not None]
    rows = noise_rows(cells, study.verdict, run_seconds=seconds)
    # Cells record their own within-run error; the request tables are read only where a cell recorded none for a
    # metric whose requests give one (cells written before they recorded it).
    if any(row.within_run_pct is None and row.metric in REQUEST_ERRORS for row in rows):
        requests = [t for t in (r.table("requests") for r in completed) if t is not None]
        rows = noise_rows(cells, study.verdict, requests, seconds)
    if judged is not None:
        rows = beside_verdicts(rows, [c.to_dict() for item in judged if item.verdict and item.entry.name != baseline.name
                                      for c in item.verdict.comparisons])
    return rows


def beside_verdicts(rows: list[NoiseFloor], comparisons: list[dict]) -> list[NoiseFloor]:
    """The floor's rows with the spread the verdicts used at each cell (`comparisons`: the candidates'
    comparisons as events hold them), so that a reader sees where the two agree and is told why where not."""
    for row in rows:
        mine = [c for c in comparisons if c.get("metric") == row.metric and c.get("cell_id") == row.cell_id]
        spreads = [100.0 * c["log_se"] / math.sqrt(1 / c["runs"] + 1 / c["baseline_runs"]) for c in mine
                   if c.get("log_se") is not None and c.get("runs") and c.get("baseline_runs")]
        row.verdict_cv_pct = statistics.median(spreads) if spreads else None
        row.verdict_decided = any(c.get("decision") in ("pass", "fail") for c in mine)
    return rows


def run_seconds(started_at: str | None, finished_at: str | None) -> float | None:
    """A launch's whole cost: from start to the end of measurement, engine load and warm-up included."""
    if not started_at or not finished_at:
        return None
    try:
        span = (datetime.fromisoformat(finished_at) - datetime.fromisoformat(started_at)).total_seconds()
    except ValueError:
        return None
    return span if span > 0 else None


#: how far two runs of one configuration part from launch-to-launch noise alone, 95% of the time, in units of its
#: between-run CV: a difference of two runs has sqrt(2) times one run's spread (on the log scale)
FLOOR_Z = statistics.NormalDist().inv_cdf(0.975) * math.sqrt(2)


@dataclass(frozen=True)
class DeltaFloor:
    """The noise floor of one run's change from a reference run at one cell and figure: the change two runs of the
    reference's own configuration show 95% of the time, from its between-run CV there (pooled within machines, as
    the study's noise floor is). A change within it is no evidence of a difference; the compare notebook, `journal
    show A B C` and the site's compare page grey it (the page's script reads `low` and `high` as written here)."""

    cell_id: str
    metric: str
    cv_pct: float
    runs: int
    machines: int = 1

    @property
    def high(self) -> float:
        """The largest ratio of a run's figure to the reference's that lies within the floor."""
        return math.exp(FLOOR_Z * self.cv_pct / 100.0)

    @property
    def low(self) -> float:
        return 1.0 / self.high

    def within(self, reference: float, figure: float) -> bool | None:
        """Whether `figure` differs from `reference` by no more than the noise; None where a ratio says nothing."""
        if not reference > 0 or not figure >= 0:
            return None
        return self.low <= figure / reference <= self.high

    def words(self) -> str:
        where = f" on {self.machines} machines, pooled within each" if self.machines > 1 else ""
        return (f"noise floor {100 * (self.low - 1):+.1f}% to {100 * (self.high - 1):+.1f}%: "
                f"{FLOOR_Z:.2f} x the between-run CV of {self.cv_pct:.1f}% over {self.runs} runs of the reference's "
                f"configuration{where}")


def change_pct(reference: float | None, figure: float | None) -> float | None:
    """A figure's change from the reference's, in percent of the reference's."""
    if reference is None or figure is None or not reference:
        return None
    return 100.0 * (figure / reference - 1.0)


def delta_floors(runs: list[tuple[str, list[dict]]],
                 metrics: dict[str, list[str]]) -> dict[tuple[str, str], DeltaFloor]:
    """(cell id, metric) -> its floor, from each completed run of the reference's configuration given as (its machine,
    its cells as records), for the `metrics` of each cell kind. Valid cells only; a cell of fewer than two runs has
    none."""
    figures: dict[tuple[str, str], list[tuple[Block, float]]] = {}
    for position, (machine, cells) in enumerate(runs):
        block = (machine, str(position))
        for cell in cells:
            if not cell.get("valid"):
                continue
            for metric in metrics.get(cell.get("kind") or "", ()):
                value = cell.get(metric)
                if isinstance(value, (int, float)) and math.isfinite(value):
                    figures.setdefault((cell["cell_id"], metric), []).append((block, float(value)))
    out = {}
    for (cell_id, metric), blocked in figures.items():
        cv = within_machines_cv(blocked) if len(blocked) > 1 else None
        if cv is not None:
            out[(cell_id, metric)] = DeltaFloor(cell_id, metric, cv, len(blocked),
                                                len({machine_of(b) for b, _ in blocked}))
    return out
