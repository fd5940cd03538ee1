"""Balanced placement for parallel and Ray sweeps: a cyclic design over lanes (GPU groups or nodes), each lane's
runs in order, the lane recorded as the run's block."""

import collections
import textwrap
import threading
import time

import numpy as np

import servebook.sweeps as sweeps
from servebook.config import load_study
from servebook.journal import Environment, Journal
from servebook.sweeps import Lane, SweepResult, gpu_lanes, place
from servebook.util.progress import Reporter
from tests.unit.test_sweep_until_decided import STUDY, FakeRunner, seal

ENTRIES = [f"c{i}" for i in range(6)]


class Entry:
    def __init__(self, name):
        self.name = name


def test_the_cyclic_design_puts_every_candidate_on_every_lane():
    entries = [Entry(n) for n in ENTRIES]
    lanes = gpu_lanes([0, 1, 2, 3, 4, 5, 6, 7], width=2, count=3)
    assert [lane.gpus for lane in lanes] == [(0, 1), (2, 3), (4, 5)]
    order = [(r, e) for r in range(3) for e in entries]
    placed = place(order, entries, lanes)
    per_entry = collections.defaultdict(set)
    for _, entry, lane in placed:
        per_entry[entry.name].add(lane.label)
    assert all(len(seen) == 3 for seen in per_entry.values()), "3 repeats on 3 lanes: each candidate on each lane"
    load = collections.Counter(lane.label for _, _, lane in placed)
    assert set(load.values()) == {6}, "lanes carry the same number of runs"
    for repeat in range(3):  # in each round the candidates spread over every lane
        assert {lane.label for r, _, lane in placed if r == repeat} == {lane.label for lane in lanes}


def test_each_gpu_lane_runs_one_at_a_time_in_order_and_lanes_run_at_once():
    lanes = gpu_lanes([0, 1], width=1, count=2)
    entries = [Entry(n) for n in ENTRIES[:4]]
    placed = place([(r, e) for r in range(2) for e in entries], entries, lanes)
    spans, lock = [], threading.Lock()

    def one(repeat, entry, lane):
        started = time.monotonic()
        time.sleep(0.05)
        with lock:
            spans.append((lane.label, started, time.monotonic(), (repeat, entry.name)))
        return SweepResult(entry.name, "id", None, "completed", 0.0, f"{repeat}")

    results = sweeps.orchestrate.run_placed(placed, one, lambda: None)
    assert [(r.name, r.message) for r in results] == [(e.name, str(r)) for r, e, _ in placed], "placed order kept"
    for label in ("gpus 0", "gpus 1"):
        mine = sorted((s for s in spans if s[0] == label), key=lambda s: s[1])
        assert all(a[2] <= b[1] for a, b in zip(mine, mine[1:], strict=False)), "one run at a time on a lane"
        assert [s[3] for s in mine] == [(r, e.name) for r, e, lane in placed if lane.label == label]
    first = {label: min(s[1] for s in spans if s[0] == label) for label in ("gpus 0", "gpus 1")}
    assert abs(first["gpus 0"] - first["gpus 1"]) < 0.04, "the two lanes ran side by side"


class LaneRunner(FakeRunner):
    """Seals each run with the lane it was placed on, as a real run records it."""

    def run(self, study, entry, journal, reporter, lane=None):
        result = seal(journal, study, entry, self.rng)
        self.lanes.append((entry.name, lane.label if lane else None))
        return result

    def __init__(self, rng):
        super().__init__(rng)
        self.lanes = []


def test_a_parallel_sweep_until_decided_keeps_every_candidate_moving_across_lanes(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(STUDY))
    study = load_study(path).model_copy(update={"repeats": 2})
    runner = LaneRunner(np.random.default_rng(3))
    sweeps.sweep(study, Journal(tmp_path / "journal"), reporter=Reporter(quiet=True), max_repeats=6, runner=runner,
                 parallel=2, gpus=[0, 1])
    per_candidate = collections.defaultdict(collections.Counter)
    for name, lane in runner.lanes:
        per_candidate[name][lane] += 1
    for name, lanes in per_candidate.items():
        assert set(lanes) <= {"gpus 0", "gpus 1"}
        if sum(lanes.values()) >= 2:
            assert len(lanes) == 2 and max(lanes.values()) - min(lanes.values()) <= 1, (name, lanes)


def test_the_lane_is_the_block_whatever_part_of_it_a_candidate_used():
    two = Environment(machine_id="m", boot_id="b", lane="gpus 0,1", gpus=[{"uuid": "A"}, {"uuid": "B"}],
                      engine_env={"CUDA_VISIBLE_DEVICES": "0,1"})
    one = Environment(machine_id="m", boot_id="b", lane="gpus 0,1", gpus=[{"uuid": "A"}],
                      engine_env={"CUDA_VISIBLE_DEVICES": "0"})
    other = Environment(machine_id="m", boot_id="b", lane="gpus 2,3", gpus=[{"uuid": "C"}])
    assert one.machine_key == two.machine_key != other.machine_key
    unplaced = Environment(machine_id="m", boot_id="b", gpus=[{"uuid": "A"}])
    assert unplaced.machine_key == "m:b/A"


def test_ray_nodes_with_the_gpus_are_the_lanes():
    from servebook.distributed import node_lanes

    nodes = [{"NodeID": "b" * 40, "Alive": True, "Resources": {"GPU": 8}, "NodeManagerAddress": "10.0.0.2"},
             {"NodeID": "a" * 40, "Alive": True, "Resources": {"GPU": 8}, "NodeManagerAddress": "10.0.0.1"},
             {"NodeID": "c" * 40, "Alive": False, "Resources": {"GPU": 8}},
             {"NodeID": "d" * 40, "Alive": True, "Resources": {"CPU": 64}}]
    assert [lane.label for lane in node_lanes(nodes, 2)] == ["node 10.0.0.1", "node 10.0.0.2"]
    assert all(lane.node and lane.gpus is None for lane in node_lanes(nodes, 2))
    assert node_lanes(nodes, 16) == []
    assert Lane("x") == Lane("x")
