"""--until-decided adds runs only where verdicts are inconclusive (and to the baseline to keep pace), stops
when decided or at --max-repeats; the journal is its state."""

import textwrap

import numpy as np

import servebook.sweeps as sweep_module
from servebook.config import load_study
from servebook.journal import Journal
from servebook.sweeps import SweepResult
from servebook.util.progress import Reporter
from tests.helpers.journals import sealed_run

STUDY = """
name: adaptive
base:
  model: {path: "tiny:target"}
  knobs: {chunk_size: 512, max_running_requests: 4}
variants:
  - {name: clear-loss, set: {knobs.max_running_requests: 1}}
  - {name: near-limit, set: {knobs.chunk_size: 256}}
plan:
  decode: {concurrency: [4], categories: [prose], output_tokens: 16, rounds: 1}
  prefill: null
verdict:
  rules:
    - {metric: aggregate_tok_s, concurrency: [4], max_regression_pct: 7}
"""
# true means: baseline 200, clear-loss 100 (-50%), near-limit 186 (-7%, on the limit)
TRUTH = {"baseline": 200.0, "clear-loss": 100.0, "near-limit": 186.0}


def seal(journal, study, entry, rng):
    value = TRUTH[entry.name] * rng.normal(1, 0.04)
    writer = sealed_run(journal, entry.candidate.id, cells=[{
        "cell_id": "decode-prose-c4", "kind": "decode", "category": "prose", "concurrency": 4,
        "target_prompt_tokens": None, "aggregate_tok_s": value, "valid": True, "invalid_reasons": "",
        "reconciliation": "ok"}], candidate_label=entry.name, plan_id=study.plan.id, study=study.name,
        study_entry=entry.name)
    return SweepResult(entry.name, entry.candidate.id, writer.run_id, "completed", 0.0)


class FakeRunner:
    """A runner that seals a run with a figure drawn around the truth, instead of launching anything."""

    def __init__(self, rng):
        self.rng, self.closed = rng, 0

    def run(self, study, entry, journal, reporter, lane=None):
        return seal(journal, study, entry, self.rng)

    def close(self):
        self.closed += 1


def test_runs_are_added_only_where_undecided_and_stop_at_the_budget(tmp_path, monkeypatch):
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(STUDY))
    study = load_study(path)
    journal = Journal(tmp_path / "journal")
    rng = np.random.default_rng(1)
    runner = FakeRunner(rng)
    results = sweep_module.sweep(study, journal, reporter=Reporter(quiet=True), max_repeats=6, runner=runner)
    counts = {}
    for r in results:
        counts[r.name] = counts.get(r.name, 0) + (r.status == "completed")
    assert counts["clear-loss"] <= 3, "a clearly decided candidate gets no more runs than it needs"
    assert counts["near-limit"] == 6, "a change on the limit stays undecided until the budget is spent"
    assert counts["baseline"] == 6
    # resumable: a second call with the same budget adds nothing
    again = sweep_module.sweep(study, journal, reporter=Reporter(quiet=True), max_repeats=6, runner=runner)
    assert all(r.status == "skipped" for r in again)
    assert runner.closed == 2, "the sweep releases its runner"


def test_the_skip_policy_is_one_function_a_failed_load_is_a_record(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(STUDY))
    study = load_study(path)
    journal = Journal(tmp_path / "journal")
    entry = study.expand()[1]
    assert sweep_module.recorded(study, entry, journal, 0, retry_failed=False) is None
    sealed_run(journal, entry.candidate.id, "failed", plan_id=study.plan.id)
    skip = sweep_module.recorded(study, entry, journal, 2, retry_failed=False)
    assert skip is not None and skip.status == "skipped" and "failed load" in skip.message
    assert sweep_module.recorded(study, entry, journal, 0, retry_failed=True) is None


def test_the_baseline_catches_up_with_its_share_in_one_round_interleaved():
    from servebook.sweeps.orchestrate import baseline_target, spread

    # five open candidates about to have 4 runs each: the baseline should have ceil(sqrt(5) x 4) = 9
    assert baseline_target(5, 3, max_repeats=6) == 9
    assert baseline_target(5, 5, max_repeats=6) == 12, "within twice a candidate's budget"
    merged = spread(["a", "b", "c", "d", "e"], "base", 3)
    assert merged.count("base") == 3 and [x for x in merged if x != "base"] == ["a", "b", "c", "d", "e"]
    assert merged[0] == "base" and "base base" not in " ".join(merged), "spread, not bunched"
    assert spread(["a"], "base", 0) == ["a"] and spread([], "base", 2) == ["base", "base"]


def test_a_notebook_that_ran_no_cell_is_told_apart(tmp_path):
    import nbformat

    from servebook.sweeps.runner import ran_a_cell

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("x"), nbformat.v4.new_code_cell("1")])
    path = tmp_path / "n.ipynb"
    nbformat.write(notebook, path)
    assert not ran_a_cell(path) and not ran_a_cell(tmp_path / "missing.ipynb")
    notebook.cells[1].execution_count = 1
    nbformat.write(notebook, path)
    assert ran_a_cell(path)


def test_a_time_budget_starts_no_run_it_cannot_hold_and_the_next_sweep_resumes(tmp_path):
    from servebook.sweeps.budget import TimeBudget

    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(STUDY))
    study = load_study(path)
    journal = Journal(tmp_path / "journal")
    now = [0.0]

    class SlowRunner(FakeRunner):
        def run(self, study, entry, journal, reporter, lane=None):
            now[0] += 100.0  # every run takes 100 s of the lent machine's time
            result = seal(journal, study, entry, self.rng)
            result.seconds = 100.0
            return result

    runner = SlowRunner(np.random.default_rng(2))
    budget = TimeBudget(runner, 250.0, clock=lambda: now[0])
    results = sweep_module.sweep(study, journal, reporter=Reporter(quiet=True), runner=budget)
    # 100 s and 200 s are spent; 50 s cannot hold a third run of 100 s (with its margin), so none starts
    assert [r.status for r in results] == ["completed", "completed"] and now[0] == 200.0
    assert len(journal.runs()) == 2, "no run was begun and left half-done"
    assert runner.closed == 1
    rest = sweep_module.sweep(study, journal, reporter=Reporter(quiet=True), runner=SlowRunner(np.random.default_rng(3)))
    assert [r.status for r in rest] == ["skipped", "skipped", "completed"], "the next sweep resumes where it stopped"


def test_resident_rounds_are_cut_where_a_candidate_would_come_again_and_admitted_whole(tmp_path):
    from servebook.sweeps.budget import OutOfTime, TimeBudget
    from servebook.sweeps.resident import rounds_of

    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(STUDY))
    study = load_study(path)
    entries = study.expand()
    order = [(repeat, entry, None) for repeat in range(2) for entry in entries]
    assert [[e.name for _, e, _ in r] for r in rounds_of(order)] == [[e.name for e in entries]] * 2
    assert [len(r) for r in rounds_of(order[1:])] == [3, 2], "each candidate once a round, however the sweep resumes"

    now = [0.0]
    journal = Journal(tmp_path / "journal")
    budget = TimeBudget(FakeRunner(np.random.default_rng(0)), 100.0, clock=lambda: now[0])
    budget.admit_round(study, entries, journal)
    budget.round_took(40.0)
    now[0] = 50.0  # 50 s left, and a round took 40 s: 48 s with the margin
    budget.admit_round(study, entries, journal)
    now[0] = 60.0
    try:
        budget.admit_round(study, entries, journal)
    except OutOfTime as stop:
        assert entries[0].name in str(stop) and "40 s" in str(stop) and "the longest round of this sweep" in str(stop)
    else:
        raise AssertionError("a round the time left cannot hold must not start")


def test_a_serial_sweep_says_each_first_look_as_it_comes_then_its_verdicts_after_each_round_and_records_none(
        tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(STUDY).replace("plan:", "repeats: 3\nplan:"))
    study = load_study(path)
    journal = Journal(tmp_path / "journal")
    said: list[str] = []
    reporter = Reporter(quiet=True)
    reporter.log = said.append  # type: ignore[method-assign]
    sweep_module.run_pending(study, study.expand(), journal, FakeRunner(np.random.default_rng(3)), reporter, False)
    first = [line for line in said if line.startswith("verdict so far, after its first run")]
    assert [line.splitlines()[1].split(":")[0].strip() for line in first] == ["clear-loss", "near-limit"]
    assert "clear-loss: rejected (1 run): aggregate decode" in first[0]
    # said as soon as the run is sealed: before the next candidate's run starts
    assert said.index(first[0]) < next(i for i, line in enumerate(said) if line.startswith("near-limit: repeat 1"))
    interim = [line for line in said if line.startswith("verdicts after round")]
    assert len(interim) == 1 and interim[0].startswith("verdicts after round 2 of 3")
    assert "clear-loss: rejected (2 runs)" in interim[0] and "near-limit:" in interim[0]
    assert not any(r.verdicts() for r in journal.runs()), "said, not recorded"


def test_a_dry_run_says_what_is_recorded_what_will_run_and_roughly_how_long(tmp_path):
    from servebook.present.views import DryRunView
    from servebook.sweeps.dryrun import planned
    from servebook.util.render import to_text

    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(STUDY).replace("plan:", "repeats: 3\nplan:"))
    study = load_study(path)
    journal = Journal(tmp_path / "journal")
    assert [e.recorded for e in planned(study, None).entries] == [None] * 3, "no journal: nothing said about it"
    baseline, loss, _ = study.expand()
    for entry, seconds in ((baseline, 40), (baseline, 50), (loss, 59)):
        sealed_run(journal, entry.candidate.id, plan_id=study.plan.id, study=study.name, study_entry=entry.name,
                   started_at="2026-12-02T10:00:00+00:00", finished_at=f"2026-12-02T10:00:{seconds}+00:00")
    before = sorted(p.name for p in (tmp_path / "journal").rglob("*"))
    plan = planned(study, journal)
    assert [e.recorded for e in plan.entries] == [2, 1, 0] and plan.to_run == 6 and plan.run_s == 50
    text = to_text(DryRunView(plan.entries, study.plan.id, plan).blocks())
    assert "baseline" in text and "2 of 3 runs recorded" in text and "to run: 6 runs, about 5 min" in text
    assert sorted(p.name for p in (tmp_path / "journal").rglob("*")) == before, "a dry run writes nothing"


def test_a_resident_round_left_without_the_baseline_gets_a_baseline_run_beside_it(tmp_path):
    """A candidate whose run of round 2 failed is made again alone: a block of the verdict's model with no baseline
    in it, which compares nothing. The sweep seats a baseline run beside it; a round that has the baseline, or no
    free seat, gets none."""
    from servebook.config import load_study

    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(STUDY).replace("plan:", "repeats: 2\nplan:"))
    study = load_study(path)
    journal = Journal(tmp_path / "journal")
    rng = np.random.default_rng(3)
    entries = {entry.name: entry for entry in study.expand()}
    for name in ("baseline", "clear-loss", "near-limit", "baseline", "near-limit"):  # clear-loss's 2nd run failed
        seal(journal, study, entries[name], rng)
    seated = []

    class SeatedRunner(FakeRunner):
        def run(self, study, entry, journal, reporter, lane=None, seat=None):
            seated.append((entry.name, seat.round_id if seat else None, seat.seats if seat else None))
            return seal(journal, study, entry, self.rng)

    results = sweep_module.sweep(study, journal, reporter=Reporter(quiet=True), runner=SeatedRunner(rng),
                                 resident=True)
    assert sorted(name for name, _, _ in seated) == ["baseline", "clear-loss"]
    assert len({round_id for _, round_id, _ in seated}) == 1 and {seats for _, _, seats in seated} == {2}
    assert [r.name for r in results if r.status == "completed"] == ["clear-loss", "baseline"]
    # with every seat taken (--seats 1 here: one engine at a time), no companion
    from servebook.sweeps.orchestrate import baseline_companion

    lone = [(1, entries["clear-loss"], None)]
    assert baseline_companion(study, list(entries.values()), journal, lone, seats=1) == []
    assert baseline_companion(study, list(entries.values()), journal, [(1, entries["baseline"], None)], None) == []
    assert baseline_companion(study, list(entries.values()), journal, lone, None)[0][1].name == "baseline"


def test_rounds_of_fewer_seats_than_candidates_each_keep_a_seat_for_the_baseline():
    """Six candidates in rounds of the three engines an H100 holds: cut plainly, every other round held no baseline
    and compared nothing. Each round now holds a baseline run, or closes a seat early for the companion run."""
    from types import SimpleNamespace

    from servebook.sweeps.resident import rounds_of

    names = ["baseline", "seqs-8", "chunk-2048", "ngram", "kv-fp8", "no-prefix-cache"]
    order = [(repeat, SimpleNamespace(name=name), None) for repeat in range(2) for name in names]
    plain = [[e.name for _, e, _ in r] for r in rounds_of(order, 3)]
    assert plain[1] == ["ngram", "kv-fp8", "no-prefix-cache"], "the old cut: a round with no baseline"
    rounds = [[e.name for _, e, _ in r] for r in rounds_of(order, 3, "baseline")]
    assert [name for r in rounds for name in r] == [e.name for _, e, _ in order], "every run once, in order"
    for names_in_round in rounds:
        assert "baseline" in names_in_round or len(names_in_round) <= 2, names_in_round
    assert rounds[:2] == [["baseline", "seqs-8", "chunk-2048"], ["ngram", "kv-fp8"]]
    # one configuration launched many times (the noise studies): its launches fill every seat, as before
    noise = [(repeat, SimpleNamespace(name="baseline"), None) for repeat in range(8)]
    assert [len(r) for r in rounds_of(noise, 4, "baseline")] == [4, 4]


def test_a_resident_sweep_with_fewer_seats_than_candidates_seats_the_baseline_in_every_round(tmp_path):
    """--seats 2 over a baseline and two candidates, then --until-decided: every round of engines side by side holds
    a baseline run, whether the study placed one there or the sweep seated a companion."""
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(STUDY))
    study = load_study(path)
    journal = Journal(tmp_path / "journal")
    seated: list[tuple[str, str]] = []

    class SeatedRunner(FakeRunner):
        def run(self, study, entry, journal, reporter, lane=None, seat=None):
            seated.append((entry.name, seat.round_id if seat else f"alone-{len(seated)}"))  # a round of one run
            return seal(journal, study, entry, self.rng)

    sweep_module.sweep(study, journal, reporter=Reporter(quiet=True), runner=SeatedRunner(np.random.default_rng(5)),
                       resident=True, seats=2, max_repeats=4)
    rounds: dict[str, list[str]] = {}
    for name, round_id in seated:
        rounds.setdefault(round_id, []).append(name)
    assert len(rounds) >= 2 and all(len(names) <= 2 for names in rounds.values())
    assert all("baseline" in names for names in rounds.values()), rounds
    assert {name for name, _ in seated} == {"baseline", "clear-loss", "near-limit"}


def test_a_round_s_companion_run_does_not_move_the_sweep_s_progress_past_its_total():
    from servebook.sweeps.orchestrate import planned_ticks

    advanced = []
    tick = planned_ticks(lambda: advanced.append(1), 2)
    for _ in range(3):  # two planned runs and the baseline's companion
        tick()
    assert len(advanced) == 2
