"""A configuration search (`servebook search STUDY`): prune what cannot fit, screen with a short plan where a
model of the space expects the most, then confirm the best few with interleaved repeats under the full plan,
so the winner comes with an interval against the runner-up instead of one lucky launch.

The journal is the state: every screening and confirmation launch is an ordinary run (the study's name, the
configuration's name), so an interrupted search resumes where it stopped and spends only what is left of its
budget. The search's own record (pruned with reasons, the order of screening and why, the confirmation) is
appended under searches/ in the journal.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from ..config.errors import InputError, format_validation_error
from ..config.study import Study, StudyEntry
from ..estimates import ALPHA, fit_contrasts
from ..journal import Journal, RunRecord
from ..measure.validity import only_disturbed
from ..util.progress import Reporter
from ..util.render import Block, Renderable, Table, Text
from ..verdicts.comparisons import select_cells
from ..verdicts.evidence import cell_codes, run_cells
from .memory_fit import does_not_fit
from .options import SweepOptions
from .orchestrate import Orchestration, orchestration
from .pending import counted_statuses
from .runner import PapermillRunner, Runner
from .space import Config, Space
from .surrogate import fit_predict, next_batch, oriented, space_filling


@dataclass
class Pruned:
    name: str
    overrides: dict[str, Any]
    reason: str


@dataclass
class Screened:
    name: str
    overrides: dict[str, Any]
    run_id: str | None
    status: str
    value: float | None
    why: str


@dataclass
class Confirmed:
    name: str
    overrides: dict[str, Any]
    run_ids: list[str]
    values: list[float]

    @property
    def figure(self) -> float | None:
        """The geometric mean of its runs' figures."""
        return math.exp(sum(map(math.log, self.values)) / len(self.values)) if self.values else None


@dataclass
class SearchResult(Renderable):
    study: str
    objective: str
    space: str
    budget: int
    lower_is_better: bool
    pruned: list[Pruned] = field(default_factory=list)
    screened: list[Screened] = field(default_factory=list)
    confirmed: list[Confirmed] = field(default_factory=list)
    winner: str | None = None
    runner_up: str | None = None
    #: the winner against the runner-up in percent, with its interval (multiple comparisons with the best)
    margin: tuple[float, float, float] | None = None
    decision: str = "not confirmed"  # better | indistinguishable | not confirmed
    method: str = ""

    @property
    def launches(self) -> int:
        return sum(1 for s in self.screened if s.run_id) + sum(len(c.run_ids) for c in self.confirmed)

    def conclusion(self) -> str:
        if self.winner is None:
            return f"no winner: {self.decision}"
        if self.margin is None:
            return f"best: {self.winner} ({self.decision})"
        pct, low, high = self.margin
        word = "better than" if self.decision == "better" else "indistinguishable from"
        return f"best: {self.winner}, {word} the runner-up {self.runner_up} by {pct:+.1f}% [{low:+.1f}, {high:+.1f}]"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["launches"] = self.launches
        data["conclusion"] = self.conclusion()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "SearchResult":
        """A recorded search (journal searches/), read back for views and the site."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["pruned"] = [Pruned(**p) for p in data.get("pruned", [])]
        fields["screened"] = [Screened(**s) for s in data.get("screened", [])]
        fields["confirmed"] = [Confirmed(**c) for c in data.get("confirmed", [])]
        fields["margin"] = tuple(data["margin"]) if data.get("margin") else None
        return cls(**fields)

    def blocks(self) -> list[Block]:
        unit = "lower is better" if self.lower_is_better else "higher is better"
        out: list[Block] = [Text(f"search {self.study}: {self.space}; objective {self.objective} ({unit}); "
                                 f"{self.launches} of {self.budget} launches", "heading"),
                            Text(self.conclusion(), "accepted" if self.decision == "better" else "warn")]
        if self.method:
            out.append(Text(self.method, "dim"))
        confirmed = Table(["configuration", "runs", "figure", "per run"], title="confirmed (full plan, interleaved)")
        for c in self.confirmed:
            confirmed.add([c.name, len(c.values), _figure(c.figure), ", ".join(_figure(v) for v in c.values)],
                          "accepted" if c.name == self.winner else "")
        screened = Table(["#", "configuration", "status", "figure", "why launched"], title="screened (short plan)")
        for i, s in enumerate(self.screened, 1):
            screened.add([i, s.name, s.status, _figure(s.value), s.why], "" if s.value is not None else "dim")
        pruned = Table(["configuration", "why never launched"], title=f"pruned ({len(self.pruned)})")
        for p in self.pruned:
            pruned.add([p.name, p.reason], "dim")
        return out + [t for t in (confirmed, screened, pruned) if t.rows]


def _objective(record: RunRecord, study: Study, cells: Any = None) -> tuple[float | None, str]:
    """(the run's objective figure: the geometric mean of the valid, undisturbed cells it selects, or None, and
    when None why: the fault codes of those cells). `cells`: the run's cells where the caller read them already."""
    assert study.search is not None
    cells = run_cells([record])[0] if cells is None else cells
    if cells is None or cells.empty:
        return None, record.status
    rule = study.search.objective.rule()
    selected = select_cells(cells, rule)
    chosen = selected[selected["valid"].astype(bool)]
    values = [float(v) for v in chosen[rule.metric] if v is not None and v == v and v > 0]
    if values:
        return math.exp(sum(map(math.log, values)) / len(values)), "completed"
    codes = sorted({code for row in cell_codes(selected) for code in row})
    word = "disturbed" if only_disturbed(codes) else "invalid"
    return None, f"{word}: {', '.join(codes)}" if codes else "the objective's cell was not measured"


def _space_entries(study: Study, result: SearchResult) -> tuple[list[Config], list[StudyEntry]]:
    """The configurations that can be launched, each as a study entry; the others go to `result.pruned`."""
    assert study.search is not None
    configs: list[Config] = []
    entries: list[StudyEntry] = []
    for config in Space(study.search.space).configs():
        try:
            candidate = study.base.with_overrides(config.overrides).model_copy(update={"name": config.name})
        except ValidationError as error:
            # the problems on one line, each naming its field (the report's column holds one reason)
            problems = [line.strip() for line in format_validation_error(error, "").splitlines()[1:]]
            result.pruned.append(Pruned(config.name, config.overrides,
                                        "not a valid configuration: " + "; ".join(problems)))
            continue
        memory = study.search.memory
        try:
            reason = does_not_fit(candidate, memory) if memory is not None else None
        except (ValueError, OSError) as error:
            raise InputError(f"study {study.name}: search.memory: {error}") from None
        if reason:
            result.pruned.append(Pruned(config.name, config.overrides, reason))
            continue
        same = next((e for e in entries if e.candidate.id == candidate.id), None)
        if same is not None:  # a knob outside the identity the space model cannot know of: one launch counted twice
            knobs = [k for k in config.overrides if config.overrides[k] != same.overrides.get(k)]
            raise InputError(f"study {study.name}: search.space: {same.name} and {config.name} are the same "
                             f"candidate ({candidate.id}); {', '.join(knobs)} does not change what the engine does")
        configs.append(config)
        entries.append(StudyEntry(config.name, candidate, config.overrides))
    return configs, entries


def search(study: Study, journal: Journal, options: SweepOptions | None = None, *, runner: Runner | None = None,
           reporter: Reporter | None = None, budget: int | None = None, **flags: Any) -> SearchResult:
    """Prune, screen and confirm the study's search space within `budget` launches (default: the study's), through
    the sweep's orchestration: `options.parallel`/`gpus` (or `flags`): launches at once on disjoint GPU groups
    (lanes, as a sweep); a runner that places its runs itself (Ray) launches as many at once as it can hold."""
    options = replace(options or SweepOptions(), **flags)
    if study.search is None:
        raise InputError(f"study {study.name}: no search section (space, objective) to search")
    spec = study.search if budget is None else study.search.model_copy(update={"budget": budget})
    if spec.budget < spec.confirm.top * (spec.confirm.repeats + 1):
        raise InputError(f"--budget {spec.budget}: confirming {spec.confirm.top} x {spec.confirm.repeats} needs "
                         f"{spec.confirm.top * (spec.confirm.repeats + 1)} launches with its screening")
    study = study.model_copy(update={"search": spec})
    reporter = reporter or Reporter()
    journal.ensure_writable()
    space = Space(spec.space)
    result = SearchResult(study.name, spec.objective.describe(), space.describe(), spec.budget,
                          spec.objective.lower_is_better)
    configs, entries = _space_entries(study, result)
    reporter.log(f"search {study.name}: {len(configs)} of {spec.size} configurations fit, {len(result.pruned)} "
                 f"pruned before launching")
    if len(entries) <= 1:  # nothing to choose between: said without spending a launch
        result.winner = entries[0].name if entries else None
        result.decision = "the only configuration that fits; nothing was launched" if entries else \
            "every configuration was pruned; nothing was launched"
        return _recorded(result, journal)
    screening = study.model_copy(update={"plan": study.screening_plan()})
    # A search spends its own budget on its own repeats: the sweep's looks, rounds and clock are not its options.
    with orchestration(screening, entries, journal, runner or PapermillRunner(), options, reporter,
                       only={"--parallel", "--gpus"}, what="a search") as run:
        _screen(study, run, configs, entries, result)
        _confirm(study, run, configs, entries, result)
    return _recorded(result, journal)


def _recorded(result: SearchResult, journal: Journal) -> SearchResult:
    journal.add_search(result.study, result.to_json())
    return result


def _screen(study: Study, run: Orchestration, configs: list[Config], entries: list[StudyEntry],
            result: SearchResult) -> None:
    """Screening launches until their share of the budget is spent: a space-filling start, then expected
    improvement under the model of everything measured so far."""
    assert study.search is not None
    spec, journal, reporter, lanes = study.search, run.journal, run.reporter, run.placement.lanes
    screen_study = study.model_copy(update={"plan": study.screening_plan(), "repeats": 1})
    features = [c.features for c in configs]
    width = max(1, len(lanes or []), run.placement.workers)
    initial = spec.screen.initial or max(4, 2 * len(spec.space))
    observed: dict[int, float] = {}
    done: set[int] = set()
    earlier = _recorded_runs(journal, screen_study.plan.id)
    for i, entry in enumerate(entries):  # what an earlier, interrupted search already measured
        if entry.candidate.id in earlier:
            _note(result, journal, study, configs[i], earlier[entry.candidate.id], "measured by an earlier search",
                  observed, i)
            done.add(i)
    with reporter.task(f"screening {study.name}", total=spec.screening_launches, unit="launches") as task:
        task.advance(min(len(done), spec.screening_launches))
        while len(done) < min(spec.screening_launches, len(configs)):
            count = min(width, spec.screening_launches - len(done))
            picks = _picks(features, observed, done, initial, count, spec.seed, spec.objective.lower_is_better)
            placed = [(0, entries[i], lanes[k % len(lanes)] if lanes else None) for k, (i, _) in enumerate(picks)]
            finished = run.placed(screen_study, placed, task.advance)
            for (i, why), made in zip(picks, finished, strict=True):
                done.add(i)
                _note(result, journal, study, configs[i], made.run_id, why, observed, i)
                reporter.log(f"screened {configs[i].name}: {result.screened[-1].status}, "
                             f"{_figure(result.screened[-1].value)} ({why})")


def _recorded_runs(journal: Journal, plan_id: str) -> dict[str, str]:
    """candidate id -> its first sealed run under `plan_id` (completed, or a failed load, which is a record)."""
    frame = journal.index()
    if frame.empty:
        return {}
    chosen = frame[(frame["plan_id"] == plan_id) & frame["status"].isin(counted_statuses(retry_failed=False))]
    return {str(c): str(r) for c, r in zip(chosen["candidate_id"][::-1], chosen["run_id"][::-1], strict=True)}


def _picks(features: list, observed: dict[int, float], done: set[int], initial: int, count: int, seed: int,
           lower_is_better: bool) -> list[tuple[int, str]]:
    """The next configurations and why: the space-filling design first, then expected improvement (a model
    needs at least three figures)."""
    if len(done) < initial or len(observed) < 3:
        spread = [i for i in space_filling(features, len(done) + count, seed, sorted(done)) if i not in done]
        return [(i, "space-filling start") for i in spread[:count]]
    left = [i for i in range(len(features)) if i not in done]
    sign = -1.0 if lower_is_better else 1.0
    return [(i, f"expected improvement {100 * gain:.1f}%, predicted {_figure(math.exp(sign * mean))} "
                f"(±{100 * sd:.0f}%)") for i, gain, mean, sd in next_batch(features, observed, left, count, seed)]


def _note(result: SearchResult, journal: Journal, study: Study, config: Config, run_id: str | None, why: str,
          observed: dict[int, float], index: int) -> None:
    assert study.search is not None
    record = journal.run(run_id) if run_id and journal.has_run(run_id) else None
    value, status = _objective(record, study) if record is not None else (None, "error")
    if value is not None:
        observed[index] = oriented(value, study.search.objective.lower_is_better)
    result.screened.append(Screened(config.name, config.overrides, run_id, status, value, why))


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _confirm(study: Study, run: Orchestration, configs: list[Config], entries: list[StudyEntry],
             result: SearchResult) -> None:
    """The best `confirm.top` screened configurations (by the model's mean, which discounts one lucky launch)
    get interleaved repeats under the full plan; the winner is compared with the rest (multiple comparisons
    with the best, Hsu: Bonferroni over the others, one-sided)."""
    assert study.search is not None
    spec, journal = study.search, run.journal
    index = {c.name: i for i, c in enumerate(configs)}
    measured = {index[s.name]: s.value for s in result.screened if s.value is not None}
    if len(measured) < 2:
        result.decision = f"only {len(measured)} screened configuration gave a figure; nothing to confirm"
        return
    scores = {i: oriented(v, spec.objective.lower_is_better) for i, v in measured.items()}
    if len(scores) >= 3:
        mean = fit_predict([c.features for c in configs], scores, spec.seed).mean
        scores = {i: float(mean[i]) for i in scores}
    top = sorted(scores, key=lambda i: -scores[i])[:spec.confirm.top]
    confirm_study = study.model_copy(update={"repeats": spec.confirm.repeats})
    run.reporter.log(f"confirming {', '.join(configs[i].name for i in top)}: {spec.confirm.repeats} interleaved runs "
                     "each")
    run.pending(confirm_study, [entries[i] for i in top], title=f"confirming {study.name}: {len(top)} x "
                                                                f"{spec.confirm.repeats}")
    groups: dict[str, list[tuple[tuple[str, ...], float]]] = {}
    for i in top:
        records = journal.find_all(entries[i].candidate.id, study.plan.id, statuses=counted_statuses(False))
        values = [(cells.attrs["block"], value) for record, cells in zip(records, run_cells(records), strict=True)
                  if cells is not None and (value := _objective(record, study, cells)[0]) is not None]
        result.confirmed.append(Confirmed(configs[i].name, configs[i].overrides, [r.run_id for r in records],
                                          [v for _, v in values]))
        if values:
            groups[configs[i].name] = [(tuple(b), v) for b, v in values]
    _judge_winner(result, groups, spec.objective.lower_is_better)


def _judge_winner(result: SearchResult, groups: dict[str, list[tuple[tuple[str, ...], float]]],
                  lower_is_better: bool) -> None:
    sign = -1.0 if lower_is_better else 1.0
    ranked = sorted((c for c in result.confirmed if c.figure is not None),
                    key=lambda c: -sign * math.log(c.figure or 1.0))
    if not ranked:
        result.decision = "no confirmed configuration gave a figure"
        return
    result.winner = ranked[0].name
    if len(ranked) < 2:
        result.decision = "the only confirmed configuration with a figure"
        return
    result.runner_up = ranked[1].name
    alpha = ALPHA / (len(ranked) - 1)
    # One fit of the confirmation; each other configuration's contrast with the winner (its variance does not
    # depend on which side is the reference), turned round to read as the winner against it.
    contrasts = fit_contrasts(groups, result.winner)
    against = {c.name: _winner_against(contrasts.get(c.name), alpha) for c in ranked[1:]}
    margin = against[result.runner_up]
    contrast = contrasts.get(result.runner_up)
    if contrast is None or margin is None:
        result.decision = "indistinguishable (no interval: too few runs)"
        return
    result.margin = margin
    beats_all = all(m is not None and (m[2] < 0 if lower_is_better else m[1] > 0) for m in against.values())
    result.decision = "better" if beats_all else "indistinguishable"
    result.method = (f"winner against each other confirmed configuration, one-sided {100 * (1 - alpha):.1f}% "
                     f"(Bonferroni over {len(ranked) - 1}), {contrast.method}")


def _winner_against(contrast: Any, alpha: float) -> tuple[float, float, float] | None:
    """(change, lower, upper) in percent of the winner against the configuration whose contrast with the winner
    this is; None without an interval."""
    bounds = contrast.bounds_pct(alpha) if contrast is not None else None
    if contrast is None or bounds is None:
        return None
    def flip(pct: float) -> float:
        return 100.0 * (100.0 / (100.0 + pct) - 1.0)

    return flip(contrast.pct), flip(bounds[1]), flip(bounds[0])
