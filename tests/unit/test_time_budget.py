"""`--time-budget` starts nothing it cannot finish, the first run and a resident round included (issue 56, item 6:
`--time-budget 1` started a 23 s run on a journal that already held a 23 s run of the study, and `--resident
--time-budget 20` ran a 39 s round). The estimate is read from the journal's recorded runs, else from the plan."""

import textwrap

import numpy as np

import servebook.sweeps as sweep_module
from servebook.config import load_study
from servebook.journal import Journal
from servebook.sweeps.budget import LAUNCH_FLOOR_S, TimeBudget, plan_floor_s
from servebook.util.progress import Reporter
from tests.helpers.journals import sealed_run
from tests.unit.test_sweep_until_decided import STUDY, FakeRunner


class CountingRunner(FakeRunner):
    def __init__(self):
        super().__init__(np.random.default_rng(0))
        self.started: list[str] = []

    def run(self, study, entry, journal, reporter, lane=None, seat=None):
        self.started.append(entry.name)
        return super().run(study, entry, journal, reporter, lane)


def study_at(tmp_path, text=STUDY):
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(text))
    return load_study(path)


def record(journal, study, entry, seconds, seats=None):
    resident = None if seats is None else {"round_id": "round-x", "directory": "d", "seat": 0, "seats": seats}
    sealed_run(journal, entry.candidate.id, plan_id=study.plan.id, study=study.name, study_entry=entry.name,
               started_at="2026-12-01T10:00:00+00:00", finished_at=f"2026-12-01T10:00:{seconds:02d}+00:00",
               resident=resident)


def swept(study, journal, budget_s, **flags):
    said: list[str] = []
    reporter = Reporter(quiet=True)
    reporter.log = said.append  # type: ignore[method-assign]
    runner = CountingRunner()
    sweep_module.sweep(study, journal, reporter=reporter, runner=runner, time_budget_s=budget_s, **flags)
    return runner.started, [line for line in said if line.startswith("time budget")]


def test_a_budget_shorter_than_a_recorded_run_of_the_plan_starts_nothing(tmp_path):
    study = study_at(tmp_path)
    journal = Journal(tmp_path / "journal")
    record(journal, study, study.expand()[0], 23)  # the baseline's run is recorded: the others are left to run
    started, said = swept(study, journal, 10.0)
    assert started == []
    assert len(said) == 1 and "expected to take 23 s (the longest recorded run of this plan)" in said[0]


def test_a_candidates_own_recorded_runs_come_first(tmp_path):
    study = study_at(tmp_path, STUDY.replace("plan:", "repeats: 2\nplan:"))
    journal = Journal(tmp_path / "journal")
    baseline, loss, near = study.expand()
    record(journal, study, baseline, 40)
    record(journal, study, loss, 5)
    record(journal, study, near, 5)
    budget = TimeBudget(CountingRunner(), 30.0)
    assert budget.expected(study, loss, journal) == (5.0, "the longest of its 1 recorded runs")
    assert budget.expected(study, baseline, journal) == (40.0, "the longest of its 1 recorded runs")
    started, said = swept(study, journal, 30.0)
    assert "baseline" not in started


def test_with_nothing_recorded_the_plans_floor_is_the_estimate_and_said(tmp_path):
    study = study_at(tmp_path)
    started, said = swept(study, Journal(tmp_path / "journal"), 1.0)
    assert started == []
    assert len(said) == 1 and "no run of this plan recorded yet: the plan's floor" in said[0]
    assert f"{LAUNCH_FLOOR_S:.0f} s" in said[0]


def test_the_plans_floor_counts_the_windows_it_waits_out():
    from servebook.config.plan import Plan

    plan = Plan.model_validate({"decode": None, "prefill": None,
                                "load": {"rates_rps": [1.0, 2.0], "warmup_s": 2, "duration_s": 10}})
    assert plan_floor_s(plan) == LAUNCH_FLOOR_S + 2 * 12


def test_a_resident_round_of_runs_longer_together_than_the_budget_does_not_start(tmp_path):
    study = study_at(tmp_path, STUDY.replace("plan:", "repeats: 2\nplan:"))
    journal = Journal(tmp_path / "journal")
    for entry in study.expand():
        record(journal, study, entry, 13)  # each 13 s alone: a round of the three measures them in turn, 39 s
    started, said = swept(study, journal, 20.0, resident=True)
    assert started == []
    assert len(said) == 1 and "a resident round is expected to take 39 s (its seats' runs one after another" in said[0]


def test_a_round_is_expected_to_take_the_longest_recorded_round_of_as_many_seats(tmp_path):
    study = study_at(tmp_path, STUDY.replace("plan:", "repeats: 2\nplan:"))
    journal = Journal(tmp_path / "journal")
    for entry in study.expand():
        record(journal, study, entry, 39, seats=3)
    started, said = swept(study, journal, 20.0, resident=True)
    assert started == []
    assert len(said) == 1 and "a resident round is expected to take 39 s (the longest recorded round of 3 seats)" \
        in said[0]


def test_a_budget_that_holds_one_resident_round_runs_one_and_the_next_sweep_resumes(tmp_path, monkeypatch):
    """`BUDGET=540 gpu-host.sh study --resident` one round per call (issue 53: the 8B study's header ran two rounds of
    six engines, 12 minutes, in one call of 10): the first round is admitted on the plan's floor, the second is not
    once the first took longer than what is left, and the next sweep (the next call) runs it from the journal."""
    import functools
    import threading
    import types

    from servebook.sweeps import orchestrate, resident

    now, lock = [0.0], threading.Lock()
    monkeypatch.setattr(orchestrate, "TimeBudget", functools.partial(TimeBudget, clock=lambda: now[0]))
    monkeypatch.setattr(resident, "time", types.SimpleNamespace(monotonic=lambda: now[0]))

    class MinuteRunner(CountingRunner):  # every run takes 100 s of the fake clock; a round of 3 measures in turn
        def run(self, study, entry, journal, reporter, lane=None, seat=None):
            with lock:
                now[0] += 100
            return super().run(study, entry, journal, reporter, lane, seat)

    study = study_at(tmp_path, STUDY.replace("plan:", "repeats: 2\nplan:"))
    journal = Journal(tmp_path / "journal")
    calls = []
    for _ in range(2):
        runner, said = MinuteRunner(), []
        reporter = Reporter(quiet=True)
        reporter.log = said.append  # type: ignore[method-assign]
        sweep_module.sweep(study, journal, reporter=reporter, runner=runner, time_budget_s=540, resident=True)
        calls.append((sorted(runner.started), [line for line in said if line.startswith("time budget")]))
    (first, stopped), (second, _) = calls
    assert first == second == ["baseline", "clear-loss", "near-limit"]
    assert len(stopped) == 1 and "a resident round is expected to take 300 s (the longest round of this sweep)" \
        in stopped[0]
