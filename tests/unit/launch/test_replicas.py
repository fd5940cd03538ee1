"""Replicas on one host: a port each, the router in front, the candidate's identity, and the GPU split of the
seed's 4- and 8-GPU shapes (2x2 and 4x2: replicas x tensor parallel), checked from dry runs."""

import itertools
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from servebook.engines import get_engine
from servebook.launch.compose import render
from servebook.launch.replicas import gpu_split, plan_replicas
from servebook.launch.target import Target
from tests.helpers.candidates import make_candidate


def ports():
    counter = itertools.count(20000)
    return lambda: next(counter)


def test_each_replica_gets_its_own_port_and_the_router_points_at_them():
    c = make_candidate("llamacpp", launch={"replicas": 2, "router": {"kind": "sglang-router",
                                                                     "policy": "cache_aware"}})
    plan = plan_replicas(c, lambda port: ["llama-server", "--port", str(port)], ports())
    assert plan.ports == [20000, 20001] and plan.router_port == 20002 and plan.router_metrics_port == 20003
    assert [a[-1] for a in plan.argvs] == ["20000", "20001"]
    assert plan.router_argv[:3] == [sys.executable, "-m", "sglang_router.launch_router"]
    argv = plan.router_argv
    assert argv[argv.index("--worker-urls") + 1:argv.index("--policy")] == plan.replica_urls
    assert argv[argv.index("--policy") + 1] == "cache_aware"
    assert argv[argv.index("--prometheus-port") + 1] == "20003", "two routers on one host must not share 29000"
    assert plan.route_urls == ["http://127.0.0.1:20002"]
    without = plan_replicas(make_candidate("llamacpp", launch={"replicas": 3, "port": 8100}), lambda p: [str(p)])
    assert without.ports == [8100, 8101, 8102] and without.route_urls == without.replica_urls


def test_router_and_replicas_are_the_candidates_identity():
    one = make_candidate("llamacpp")
    two = make_candidate("llamacpp", launch={"replicas": 2})
    routed = make_candidate("llamacpp", launch={"replicas": 2, "router": {"kind": "sglang-router",
                                                                          "policy": "round_robin"}})
    aware = make_candidate("llamacpp", launch={"replicas": 2, "router": {"kind": "sglang-router",
                                                                         "policy": "cache_aware"}})
    assert len({one.id, two.id, routed.id, aware.id}) == 4
    assert "launch" not in one.identity(), "a one-replica candidate keeps the id it had before replicas"
    assert routed.identity()["launch"]["router"] == {"kind": "sglang-router", "policy": "round_robin"}
    patient = make_candidate("llamacpp", launch={"replicas": 2, "router": {"kind": "sglang-router",
                                                                           "policy": "round_robin",
                                                                           "ready_timeout_s": 120}})
    assert patient.id == routed.id, "how long servebook waits for the router is not what the router does"
    keyed = make_candidate("llamacpp", launch={"replicas": 2, "router": {
        "kind": "sglang-router", "policy": "manual", "session_header": "x-smg-routing-key"}})
    assert keyed.identity()["launch"]["router"]["session_header"] == "x-smg-routing-key"
    assert keyed.id != make_candidate("llamacpp", launch={"replicas": 2, "router": {
        "kind": "sglang-router", "policy": "manual"}}).id, "whether turns carry their session's key is identity"


def test_the_session_header_reaches_the_measured_route_and_the_launch_record():
    c = make_candidate("llamacpp", launch={"replicas": 2, "router": {
        "kind": "sglang-router", "policy": "manual", "session_header": "x-smg-routing-key"}})
    plan = plan_replicas(c, lambda port: ["llama-server", "--port", str(port)], ports())
    target = Target(plan.argvs[0], plan.replica_urls[0], replicas=plan)
    assert target.session_header == "x-smg-routing-key"
    assert plan.record(lambda argv: argv)["router"]["session_header"] == "x-smg-routing-key"
    assert Target(["x"], "http://127.0.0.1:1").session_header is None


@pytest.mark.parametrize("launch,match", [
    ({"replicas": 2, "kill_replica": {"replica": 2, "after_s": 1}}, "not one of the 2 replica"),
    ({"mode": "attach", "url": "http://127.0.0.1:1", "replicas": 2}, "not for mode: attach"),
    ({"replicas": 2, "cpus": [0]}, "launch.cpus"),
    ({"router": {"kind": "nginx", "policy": "round_robin"}}, "kind"),
    ({"router": {"kind": "sglang-router"}}, "policy"),
    ({"router": {"kind": "sglang-router", "policy": "manual", "session_header": "x key"}}, "session_header"),
])
def test_replica_settings_are_checked(launch, match):
    with pytest.raises(ValidationError, match=match):
        make_candidate("llamacpp", launch=launch)


def test_compose_replicas_are_every_one_measured():
    c = make_candidate("vllm", launch={"mode": "compose", "image": "vllm/vllm-openai:v0.26.0", "replicas": 2,
                                       "gpus": [0, 1]})
    plan = render(c, get_engine("vllm"), model_path="m", draft_path=None, first_port=31000)
    target = Target(["docker", "compose", "up"], "http://127.0.0.1:31000", plan)
    assert target.replica_urls == ("http://127.0.0.1:31000", "http://127.0.0.1:31001")
    assert target.router_url is None, "compose replicas are spread by servebook"
    one = make_candidate("vllm", launch={"mode": "compose", "image": "vllm/vllm-openai:v0.26.0"})
    single = render(one, get_engine("vllm"), model_path="m", draft_path=None, first_port=31000)
    assert Target([], "http://127.0.0.1:31000", single).replica_urls == (), "one engine is measured as before"


@pytest.mark.parametrize("replicas,gpus", [(2, 4), (4, 8)])
def test_gpu_split_of_the_seeds_shapes(replicas, gpus):
    """2 replicas x TP2 on 4 GPUs and 4 x TP2 on 8: each replica its own pair, no GPU shared, in compose and in
    process mode alike (a dry run: nothing starts)."""
    knobs = {"tensor_parallel_size": 2}
    local = make_candidate("vllm", knobs=knobs, launch={"replicas": replicas, "gpus": list(range(gpus))})
    split = [e["CUDA_VISIBLE_DEVICES"] for e in gpu_split(local, get_engine("vllm"))]
    assert split == [f"{2 * i},{2 * i + 1}" for i in range(replicas)]
    compose = make_candidate("vllm", knobs=knobs, launch={"mode": "compose", "image": "vllm/vllm-openai:v0.26.0",
                                                    "replicas": replicas, "gpus": list(range(gpus))})
    services = render(compose, get_engine("vllm"), model_path="m", draft_path=None, first_port=31000).document
    devices = [s["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"]
               for s in services["services"].values()]
    assert [",".join(d) for d in devices] == split
    assert len({port for s in services["services"].values() for port in s["ports"]}) == replicas


def test_two_replicas_may_share_one_gpu_and_a_cpu_build_gets_no_split():
    shared = make_candidate("vllm", launch={"replicas": 2, "gpus": [0, 0]})
    assert gpu_split(shared, get_engine("vllm")) == [{"CUDA_VISIBLE_DEVICES": "0"}] * 2
    assert gpu_split(make_candidate("llamacpp", launch={"replicas": 2, "simulator": True}),
                     get_engine("llamacpp")) == []


def test_a_dry_run_shows_every_replica_and_the_router_with_the_ports_it_would_pick():
    from servebook.config import load_study
    from servebook.sweeps.dryrun import dry_run

    study = load_study(Path(__file__).parents[3] / "data" / "studies" / "tiny-replicas.yaml")
    one, two = dry_run(study)
    assert len(one.more_commands) == 1 and len(two.more_commands) == 2, "each replica's line, then the router's"
    second, router = two.more_commands
    assert second[second.index("--port") + 1] == "<port: free, replica 1>"
    assert second[second.index("-np") + 1] == "2", "only ports are stand-ins"
    urls = router[router.index("--worker-urls") + 1:router.index("--policy")]
    assert urls == ["http://127.0.0.1:<port: free, replica 0>", "http://127.0.0.1:<port: free, replica 1>"]
    assert router[router.index("--port") + 1] == "<port: free, router>"


@pytest.mark.parametrize("layout,in_turn", [
    (["0", "0"], [False, True]),
    (["0", "1"], [False, False]),
    (["0,1", "2,3", "0,1"], [False, False, True]),
    (["0", "1", "0", "1"], [False, False, True, True]),
    ([], [False, False]),  # a CPU build: no GPU is shared
])
def test_replicas_sharing_a_gpu_start_in_turn_and_the_rest_at_once(monkeypatch, tmp_path, layout, in_turn):
    """vLLM sizes its memory from the device's free memory: two instances starting at once on one GPU charge each
    other's loading to themselves, so a replica on a GPU an earlier one holds is started only once that is ready."""
    from servebook.launch import replicas as module
    started: list[int] = []
    monkeypatch.setattr(module.EngineProcess, "start", lambda self: started.append(int(self.base_url.rsplit(":")[-1])))
    ports = [20000 + i for i in range(len(in_turn))]
    plan = module.ReplicaPlan("127.0.0.1", ports, [["engine"]] * len(ports))
    envs = [{"CUDA_VISIBLE_DEVICES": devices} for devices in layout]
    replica_set = module.ReplicaSet(plan, get_engine("vllm"), tmp_path, replica_envs=envs).start()
    assert [replica_set.waits_its_turn(i) for i in range(len(ports))] == in_turn
    assert started == [port for port, waits in zip(ports, in_turn, strict=True) if not waits]


def test_a_fixed_kv_size_lets_replicas_sharing_a_gpu_start_at_once():
    """vLLM with --kv-cache-memory-bytes skips its free-memory profiling (live: "skipped memory profiling"), so
    the in-turn start, a minute per replica on the H200, buys nothing there; a memory fraction still needs it."""
    vllm = get_engine("vllm")
    fraction = make_candidate("vllm", launch={"replicas": 2, "gpus": [0, 0]})
    fixed = make_candidate("vllm", launch={"replicas": 2, "gpus": [0, 0]},
                           extra_args=["--kv-cache-memory-bytes", "6442450944"])
    assert vllm.sizes_memory_from_free(fraction) and not vllm.sizes_memory_from_free(fixed)
    assert not get_engine("llamacpp").sizes_memory_from_free(make_candidate("llamacpp"))


@pytest.mark.parametrize("launch,match", [
    ({"port": 65535, "replicas": 2}, r"launch.port: 65535 with 2 replicas would give replica 1 port 65536"),
    ({"port": 65530, "replicas": 7}, r"replica 6 port 65536, above 65535; set a port of at most 65529"),
    ({"replicas": 2, "router": {"kind": "sglang-router", "policy": "random", "args": ["--port", "9"]}},
     r"--port is set by servebook"),
    ({"replicas": 2, "router": {"kind": "sglang-router", "policy": "random", "args": ["--host=0.0.0.0"]}},
     r"--host is set by servebook"),
    ({"replicas": 2, "router": {"kind": "sglang-router", "policy": "random", "args": ["--policy", "random"]}},
     r"--policy is set by servebook \(set router.policy\)"),
])
def test_replica_settings_that_failed_only_after_launch_are_refused_by_the_candidate(launch, match):
    """Issue 56, item 10: each was a `crash` run once the first replica was up."""
    with pytest.raises(ValidationError, match=match):
        make_candidate("llamacpp", launch=launch)
    assert make_candidate("llamacpp", launch={"port": 65534, "replicas": 2}).launch.port == 65534
    assert make_candidate("llamacpp", launch={"replicas": 2, "router": {
        "kind": "sglang-router", "policy": "random", "args": ["--request-timeout-secs", "30"]}}).launch.router


def test_a_taken_port_of_a_later_replica_is_refused_before_launch_and_no_run_is_recorded(tmp_path):
    import socket

    from servebook.config.errors import InputError
    from servebook.journal import Journal
    from servebook.run import run_candidate
    from tests.helpers.candidates import QUIET, SMALL_PLAN

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        first = free.getsockname()[1]
    with socket.socket() as taken:
        try:
            taken.bind(("127.0.0.1", first + 1))
        except OSError:
            pytest.skip("the port after a free one is in use on this host")
        taken.listen()
        candidate = make_candidate("llamacpp", launch={"port": first, "replicas": 2, "simulator": True})
        journal = Journal(tmp_path / "journal")
        with pytest.raises(InputError, match=rf"launch.port: 127.0.0.1:{first + 1}, replica 1's port"):
            run_candidate(candidate, SMALL_PLAN, journal, reporter=QUIET)
    assert journal.run_ids() == []


def test_a_router_that_is_not_installed_is_refused_before_launch(monkeypatch):
    import importlib.util

    from servebook.config.errors import InputError
    from servebook.launch.preflight import preflight
    from tests.helpers.candidates import QUIET

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm_router" else real(name, *a))
    candidate = make_candidate("llamacpp", launch={"replicas": 2, "simulator": True,
                                                   "router": {"kind": "vllm-router", "policy": "round_robin"}})
    with pytest.raises(InputError, match=r"launch.router.kind: vllm-router is not installed .*pip install vllm-router"):
        preflight(candidate, QUIET)
