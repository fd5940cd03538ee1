"""Candidates and plans the tests build, and the reporter they run quietly under."""

from servebook.config import Candidate, DecodePlan, Plan, PrefillPlan
from servebook.util.progress import Reporter

QUIET = Reporter(quiet=True)

# Tests share their host with whatever else CI runs. Tests about tables, counters and verdicts must not
# fail because a cell was disturbed, so their plans tolerate more load than two cores can show; host
# interference has tests of its own that set a strict limit.
TOLERANT_CORES = 4.0

SMALL_PLAN = Plan(
    name="small",
    decode=DecodePlan(concurrency=[1, 2], categories=["prose", "code"], output_tokens=16, rounds=1),
    prefill=PrefillPlan(prompt_tokens=[256, 1024], requests=1),
    warmup_requests=1,
    max_foreign_cpu_cores=TOLERANT_CORES,
)


def make_candidate(engine: str = "llamacpp", **fields) -> Candidate:
    """A candidate of `engine` on a model that engine can name (tiny:target for llama.cpp, a hub id
    otherwise), with `fields` (knobs, launch, extra_args, ...) on top."""
    model = {"path": "tiny:target"} if engine == "llamacpp" else {"id": "org/model", "revision": "abc123"}
    return Candidate.model_validate({"engine": engine, "model": model, **fields})


def tiny_candidate(**fields) -> Candidate:
    """The llama.cpp candidate the integration tests launch: small slots and context, quick to start."""
    data = {"name": "tiny-test", "knobs": {"chunk_size": 256, "max_running_requests": 2, "context_length": 8192}}
    data.update(fields)
    return make_candidate("llamacpp", **data)


def simulated(engine: str, *faults: str, **knobs) -> Candidate:
    """A candidate run by servebook's simulator in place of `engine`, with injected `faults`."""
    return make_candidate(engine, name=f"sim-{engine}", knobs={"max_running_requests": 4, **knobs},
                          launch={"simulator": True, "sim_faults": list(faults), "ready_timeout_s": 4})
