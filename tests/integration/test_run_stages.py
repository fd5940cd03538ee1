"""A run's stages share one engine adapter, looked up once when the run begins and handed down (launch,
preflight, the claims check, the endpoint), through servebook's simulator over loopback."""

import pytest

from servebook.config import Plan
from servebook.journal import Journal
from servebook.run import run_candidate
from tests.helpers.candidates import QUIET, simulated
from tests.helpers.registry import count_lookups

pytestmark = pytest.mark.simulator
PLAN = Plan.model_validate({"decode": {"concurrency": [1], "categories": ["prose"], "output_tokens": 8, "rounds": 1},
                            "prefill": None, "warmup_requests": 1, "max_foreign_cpu_cores": 8})


@pytest.mark.parametrize("engine", ["llamacpp", "vllm"])
def test_a_run_looks_its_engine_up_once(engine, tmp_path, monkeypatch):
    # a claimed context is checked against the engine's report by the engine's own arithmetic
    candidate = simulated(engine, context_length=4096)
    registry = count_lookups(monkeypatch)
    record = run_candidate(candidate, PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    assert record.manifest.engine.verification.claims["knobs.context_length"].status == "verified"
    assert registry.looked_up == [engine]
