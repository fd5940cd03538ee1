"""One orchestration for every way of running a study: each runner declares what it can honour, and every option is
either honoured by it or refused by its flag before anything starts (none dropped); the lane is a parameter."""

import textwrap

import numpy as np
import pytest
from typer.testing import CliRunner

import servebook.sweeps as sweeps
from servebook.config import load_study
from servebook.distributed import RayRunner
from servebook.journal import Journal
from servebook.launch.environment import fingerprint
from servebook.sweeps import Capabilities, Placement, SweepOptions
from servebook.util.errors import InputError
from servebook.util.progress import Reporter
from tests.unit.test_sweep_until_decided import STUDY, FakeRunner

QUIET = Reporter(quiet=True)


class ClusterRunner(FakeRunner):
    """Declares what RayRunner declares and places its own runs, two at a time, as a cluster would."""

    capabilities = RayRunner.capabilities

    def __init__(self, rng):
        super().__init__(rng)
        self.placed = 0

    def placement(self, entries, reporter):
        self.placed += 1
        return Placement(None, workers=2)


def study_at(tmp_path, repeats=1):
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(STUDY).replace("plan:", f"repeats: {repeats}\nplan:"))
    return load_study(path)


@pytest.mark.parametrize("flags, refused", [
    ({"time_budget_s": 60.0}, "--time-budget"),
    ({"resident": True}, "--resident"),
    ({"seats": 2}, "--seats"),
    ({"parallel": "auto"}, "--parallel"),
    ({"gpus": [0, 1], "parallel": 2}, "--parallel, --gpus"),
])
def test_an_option_the_runner_cannot_honour_is_refused_by_its_flag_before_anything_starts(tmp_path, flags, refused):
    runner = ClusterRunner(np.random.default_rng(0))
    journal = Journal(tmp_path / "journal")
    with pytest.raises(InputError) as error:
        sweeps.sweep(study_at(tmp_path), journal, runner=runner, reporter=QUIET, **flags)
    assert str(error.value).startswith(f"{refused}: not with --ray (a cluster's runs are placed at once")
    assert runner.placed == 0 and not journal.exists, "refused before the runner placed or recorded anything"


def test_until_decided_works_through_a_runner_that_places_its_runs_and_seals_them_elsewhere(tmp_path, monkeypatch):
    pulls = []
    monkeypatch.setattr(Journal, "pull", lambda self: pulls.append(1) or 0)
    runner = ClusterRunner(np.random.default_rng(1))
    journal = Journal(tmp_path / "journal")
    results = sweeps.sweep(study_at(tmp_path), journal, runner=runner, reporter=QUIET, max_repeats=4)
    made = [r.name for r in results if r.status == "completed"]
    assert made.count("near-limit") == 4 and made.count("baseline") == 4, "runs were added where undecided"
    assert len(made) > 3 and runner.placed == 1 and runner.closed == 1
    assert len(pulls) >= 2, "the journal is pulled before every look at the verdicts, and at the end"


def test_a_search_takes_only_its_own_options_and_names_the_others(tmp_path):
    study = study_at(tmp_path)
    with pytest.raises(InputError, match=r"^--until-decided: not with a search \(it takes --gpus, --parallel\)"):
        with sweeps.orchestration(study, study.expand(), Journal(tmp_path / "j"), FakeRunner(None),
                                  SweepOptions(max_repeats=3), QUIET, only={"--parallel", "--gpus"}, what="a search"):
            pass


def test_a_runner_that_declares_nothing_is_local_and_takes_every_option():
    from servebook.sweeps.options import LOCAL, capabilities_of, refuse_unsupported

    assert capabilities_of(FakeRunner(None)) is LOCAL
    refuse_unsupported(SweepOptions(max_repeats=3, parallel=2, gpus=[0, 1], time_budget_s=9.0, seats=2),
                       FakeRunner(None))
    narrow = type("Narrow", (FakeRunner,), {"capabilities": Capabilities(looks=False)})(None)
    with pytest.raises(InputError, match=r"^--until-decided: not with the Narrow; drop one of them"):
        refuse_unsupported(SweepOptions(max_repeats=3), narrow)


@pytest.mark.parametrize("command, refused", [
    (["sweep", "STUDY", "--ray", "auto", "--time-budget", "60"], "--time-budget: not with --ray"),
    (["sweep", "STUDY", "--ray", "auto", "--resident"], "--resident: not with --ray"),
    (["search", "STUDY", "--ray", "auto", "--parallel", "2"], "--parallel: not with --ray"),
])
def test_the_cli_refuses_by_name_before_it_connects_to_a_cluster(tmp_path, command, refused):
    from servebook.cli import app

    study = tmp_path / "study.yaml"
    study.write_text(textwrap.dedent(STUDY) + "search:\n  space: {knobs.chunk_size: [128, 256, 512]}\n"
                     "  objective: {metric: aggregate_tok_s, concurrency: 4}\n")
    args = [str(study) if a == "STUDY" else a for a in command] + ["--journal", str(tmp_path / "journal")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert refused in " ".join(result.output.split())


def test_the_lane_is_the_runs_own_parameter_not_the_processes_environment(monkeypatch):
    monkeypatch.setenv("SERVEBOOK_LANE", "gpus 9")  # what a kept kernel once carried over from its last run
    assert fingerprint()["lane"] is None
    assert fingerprint(lane="gpus 0,1")["lane"] == "gpus 0,1"
