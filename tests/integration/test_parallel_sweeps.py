"""Candidates at once on disjoint GPU groups (fake GPUs: simulated engines never touch one), locally and through
a local Ray cluster started by the test with fake GPU resources."""

from datetime import datetime

import pytest

from servebook.config.loading import study_from_data
from servebook.journal import Journal
from servebook.sweeps import sweep
from servebook.verdicts import judge
from tests.helpers.candidates import QUIET

pytestmark = pytest.mark.simulator


def tp2_study(name: str, candidates: int = 4) -> dict:
    return {
        "name": name,
        "base": {"engine": "vllm", "model": {"id": "org/model", "revision": "abc"},
                 "knobs": {"max_running_requests": 4, "tensor_parallel_size": 2},
                 "launch": {"simulator": True, "ready_timeout_s": 30}},
        "axes": {"grid": {"knobs.max_running_requests": [4 + i for i in range(1, candidates)]}},
        "plan": {"decode": {"concurrency": [1], "categories": ["prose"], "output_tokens": 16, "rounds": 1,
                            "min_cell_s": 1.5},
                 "prefill": None, "warmup_requests": 1, "max_foreign_cpu_cores": 16},
    }


def intervals(journal: Journal) -> list[tuple[datetime, datetime, str]]:
    def when(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    return [(when(r.manifest.started_at), when(r.manifest.finished_at),
             r.manifest.environment.model_dump().get("engine_env", {}).get("CUDA_VISIBLE_DEVICES"))
            for r in journal.runs()]


def most_at_once(spans) -> int:
    events = sorted([(a, 1) for a, _, _ in spans] + [(b, -1) for _, b, _ in spans], key=lambda e: (e[0], e[1]))
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def test_four_tp2_candidates_share_eight_fake_gpus_two_groups_at_a_time(tmp_path):
    journal = Journal(tmp_path)
    study = study_from_data(tp2_study("parallel"), "study")
    results = sweep(study, journal, reporter=QUIET, parallel="auto", gpus=[0, 1, 2, 3])
    assert [r.status for r in results] == ["completed"] * 4
    spans = intervals(journal)
    assert most_at_once(spans) == 2  # two TP2 groups on four GPUs, never a third
    groups = {gpus for _, _, gpus in spans}
    assert groups <= {"0,1", "2,3"} and len(groups) == 2
    for a in spans:  # runs that overlapped in time had disjoint GPUs
        for b in spans:
            if a is not b and a[0] < b[1] and b[0] < a[1]:
                assert a[2] != b[2]
    # placed by the cyclic design, and each run records its lane: the block the judge compares within
    lanes = [(r.manifest.study_entry, r.manifest.environment.lane,
              r.manifest.environment.model_dump()["engine_env"]["CUDA_VISIBLE_DEVICES"]) for r in journal.runs()]
    assert all(lane == f"gpus {visible}" for _, lane, visible in lanes)
    entries = [e.name for e in study.expand()]
    assert {name: lane for name, lane, _ in lanes} == {name: ("gpus 0,1", "gpus 2,3")[i % 2]
                                                         for i, name in enumerate(entries)}


def test_auto_stays_serial_without_gpus(tmp_path):
    journal = Journal(tmp_path)
    study = study_from_data(tp2_study("serial", candidates=2), "study")
    results = sweep(study, journal, reporter=QUIET, parallel="auto", gpus=[])
    assert [r.status for r in results] == ["completed"] * 2
    assert most_at_once(intervals(journal)) == 1


def test_a_ray_cluster_places_each_run_on_its_gpus_and_the_driver_judges_until_decided(tmp_path):
    ray = pytest.importorskip("ray")
    from servebook.distributed import RayRunner

    journal = Journal(tmp_path)
    data = tp2_study("ray", candidates=2)
    data["verdict"] = {"rules": [{"metric": "aggregate_tok_s", "concurrency": [1], "max_regression_pct": 90}]}
    study = study_from_data(data, "study")
    try:
        # the one sweep, its runs Ray tasks; --until-decided looks at the verdicts between rounds of tasks
        results = sweep(study, journal, runner=RayRunner(address=None, init={"num_cpus": 2, "num_gpus": 4,
                                                                             "include_dashboard": False}),
                        reporter=QUIET, max_repeats=2)
    finally:
        ray.shutdown()
    made = [r for r in results if r.status != "skipped"]
    assert {r.status for r in made} == {"completed"} and 2 <= len(made) <= 4
    assert all(sum(r.name == e.name for r in made) <= 2 for e in study.expand()), "at most --max-repeats runs each"
    spans = intervals(journal)
    assert {gpus for _, _, gpus in spans} <= {"0,1", "2,3"}  # Ray's assignment reached the engines
    judged = judge(study, journal)
    assert all(j.verdict is not None for j in judged)
