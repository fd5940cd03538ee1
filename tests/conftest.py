"""Shared fixtures; plain helpers live in tests/helpers, and no test imports from a conftest. Markers:
`integration` needs the real llama-server, `simulator` drives servebook's simulated engine over loopback,
`browser` drives Chromium; unmarked tests are pure logic."""

import os
import signal

import pytest

from tests.helpers.processes import alive

# Progress goes to plain log lines in tests, whatever the terminal.
os.environ.setdefault("SERVEBOOK_PLAIN_PROGRESS", "1")


@pytest.fixture(scope="session")
def llama_install():
    """The real llama-server build (built once and cached; `make test` builds it before pytest)."""
    from servebook.engines.llamacpp_build import find_llamacpp, install_llamacpp
    from servebook.models.tiny_models import ensure_tiny_models

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


@pytest.fixture
def trees():
    """The process trees a test started: whatever a failing test leaves running is killed after it."""
    started: list[set[int]] = []
    yield started
    for tree in started:
        for pid in alive(tree):
            os.kill(pid, signal.SIGKILL)
