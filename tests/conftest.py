"""Shared factories and fixtures. Markers: `integration` needs the real llama-server, `simulator` drives
servebook's simulated engine over loopback, `browser` drives Chromium; unmarked tests are pure logic."""

import os

import pytest

from servebook.config import Candidate, DecodePlan, Plan, PrefillPlan
from servebook.util.progress import Reporter

# Progress goes to plain log lines in tests, whatever the terminal.
os.environ.setdefault("SERVEBOOK_PLAIN_PROGRESS", "1")

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


@pytest.fixture(scope="session")
def llama_install():
    """The real llama-server build (built once and cached; `make test` builds it before pytest)."""
    from servebook.engines.llamacpp_build import find_llamacpp, install_llamacpp
    from servebook.engines.tiny_models import ensure_tiny_models

    install = find_llamacpp() or install_llamacpp()
    ensure_tiny_models(install)
    return install


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A real S3-compatible server on loopback (moto's server mode) with a `journals` bucket; yields the
    environment that points boto and s3fs at it."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    # moto keeps its buckets in the process, so a module after the first finds the bucket made
    if not s3fs.S3FileSystem().exists("journals"):
        s3fs.S3FileSystem().mkdir("journals")
    yield env
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    server.stop()
