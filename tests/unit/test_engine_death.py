"""An engine that dies in the middle of a cell ends the run as failed with the engine's cause, also when its socket
closed a moment before the process could be reaped (vLLM killed mid-cell on an H200: the next connection was
refused while the process still showed as running)."""

import httpx
import pytest

import servebook.run.context as run_module
from servebook.engines import Diagnosis
from servebook.util.errors import EngineFailed


class DyingEngine:
    """Reaped only after a moment: exit_code() says running until wait_exit has waited."""

    pid = None

    def __init__(self):
        self.reaped = False

    def exit_code(self):
        return -9 if self.reaped else None

    def wait_exit(self, timeout):
        self.reaped = True
        return True

    def failure(self, fallback=None):
        return Diagnosis("crash", "engine killed by signal 9").failed("", -9)


class HealthyEngine(DyingEngine):
    def wait_exit(self, timeout):
        return False


def lost_connection(*args, **kwargs):
    raise httpx.ConnectError("All connection attempts failed")


def measure(engine, monkeypatch):
    """The run's measure stage with only what it reads before the connection is lost."""
    monkeypatch.setattr(run_module, "run_blocking", lost_connection)
    from types import SimpleNamespace

    monkeypatch.setattr(run_module, "endpoint_for", lambda *args, **kwargs: None)
    run = object.__new__(run_module.RunContext)
    run.engine, run.writer = engine, SimpleNamespace(run_id="r", engine_log=None)
    run.candidate = SimpleNamespace(knobs=SimpleNamespace(drafter=SimpleNamespace(kind="none")))
    run.measured = run.log = run.reporter = run.turns = run.adapter = run.sealing = None
    run.target = run.engine_identity = run.api_key = None
    run.measure()


def test_a_lost_connection_to_an_engine_being_reaped_is_its_death(monkeypatch):
    with pytest.raises(EngineFailed) as failed:
        measure(DyingEngine(), monkeypatch)
    assert failed.value.cause == "crash" and failed.value.stage == "measure"
    assert failed.value.message == "engine killed by signal 9"


def test_a_lost_connection_to_a_living_engine_is_not_blamed_on_it(monkeypatch):
    with pytest.raises(httpx.ConnectError):
        measure(HealthyEngine(), monkeypatch)
