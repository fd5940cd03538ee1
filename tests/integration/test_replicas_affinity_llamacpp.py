"""Conversations across two tiny llama-server replicas behind sglang-router (issue 32): round robin sends a
conversation's next turn to the replica that does not hold its prefix, so the replicas serve far less of it from
their caches than a perfect prefix cache would; with every turn carrying its session's key
(launch.router.session_header) under the router's manual policy, a conversation stays where its prefix is, and the
replicas serve about all of it. Directions with wide margins; no times."""

import importlib.util
import json

import pytest

from servebook.config import Plan
from servebook.journal import Journal
from servebook.measure.validity import DISTURBANCES
from servebook.run import run_candidate
from tests.helpers.candidates import QUIET, TOLERANT_CORES, tiny_candidate

pytestmark = pytest.mark.integration

#: three agent sessions of three turns with their own system prompts, a second apart, and sub-agents that start from
#: their parent's history (tests/integration/test_agents_llamacpp.py: one engine serves about their ideal). No prompt
#: reuse or trace replay: their prompts are token ids, which sglang-router 0.3.2 refuses (422, "prompt: data did not
#: match any variant of untagged enum StringOrArray")
PLAN = Plan.model_validate({
    "decode": None, "prefill": None, "warmup_requests": 1, "max_foreign_cpu_cores": TOLERANT_CORES,
    "remeasure_disturbed": 0,
    "agents": {"sessions": 3, "arrival_rate_per_s": 1, "turns": 3, "system_tokens": 100, "shared_system_prompt": False,
               "tool_schema_tokens": 420, "repo_map_tokens": 80, "tool_result_tokens": 80, "output_tokens": 8,
               "user_turn_share": 0.2, "think_time": {"distribution": "fixed", "mean_s": 0.2},
               "subagents": {"probability": 0.3, "turns": 2}, "max_lag_ms": 500}})
#: one thread each: two replicas that each spin on both of two cores thrash (data/studies/tiny-replicas.yaml)
THREADS = ["-t", "1", "-tb", "1"]
KNOBS = {"chunk_size": 512, "max_running_requests": 4, "context_length": 16384}


def _cells(router: dict, journal: Journal, name: str):
    candidate = tiny_candidate(name=name, knobs=KNOBS, extra_args=THREADS,
                               launch={"replicas": 2, "router": {"kind": "sglang-router", **router}})
    record = run_candidate(candidate, PLAN, journal, reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    cells = record.table("cells").set_index("cell_id")
    for cell_id, cell in cells.iterrows():
        assert cell["reconciliation"] == "ok", (cell_id, cell["reconciliation_message"])
        assert not set((cell["invalid_codes"] or "").split(",")) - DISTURBANCES - {""}, cell["invalid_reasons"]
        assert cell["errors"] == 0 and cell["replicas_serving"] == 2
    return record, cells


def test_a_session_key_keeps_conversations_on_their_replica_and_round_robin_loses_their_prefixes(llama_install,
                                                                                                 tmp_path):
    assert importlib.util.find_spec("sglang_router"), "sglang-router is not installed (pip install -e '.[router]')"
    journal = Journal(tmp_path)
    _, spread = _cells({"policy": "round_robin"}, journal, "tiny-rr")
    # min_group: a new key goes to the replica holding the fewest keys (the default, random, put all three sessions
    # on one replica in one run)
    record, kept = _cells({"policy": "manual", "session_header": "x-smg-routing-key",
                           "args": ["--assignment-mode", "min_group"]}, journal, "tiny-affinity")
    rr, aff = spread.loc["agents"], kept.loc["agents"]
    print(f"ideal hit rate {aff['ideal_hit_rate']:.2f}; measured {rr['measured_hit_rate']:.2f} round robin, "
          f"{aff['measured_hit_rate']:.2f} with the key; cache kept {rr['cache_kept']:.2f} and {aff['cache_kept']:.2f}; "
          f"hit rates per replica {rr['replica_hit_rates']} and {aff['replica_hit_rates']}; generated "
          f"{rr['replica_generation_tokens']} and {aff['replica_generation_tokens']}; balance "
          f"{rr['replica_balance']:.2f} and {aff['replica_balance']:.2f}")
    assert aff["cache_kept"] > 0.85, "with the key every session found its prefix on its replica"
    # llama.cpp's slots keep older prefixes, so a turn sent back to the replica two turns before still finds most
    # of its history: round robin loses the first hop of each session (0.61 and 0.73 kept in two runs), not all
    assert rr["cache_kept"] < aff["cache_kept"] - 0.15, "round robin lost prefixes the key kept"
    assert all(c is not None for c in json.loads(aff["replica_cached_tokens"]))
    # the header is in the launch record; the router, not servebook, chose every replica
    assert json.loads((record.dir / "launch.json").read_text())["router"]["session_header"] == "x-smg-routing-key"
    assert record.table("requests")["replica"].isna().all()
