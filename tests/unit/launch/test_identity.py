"""Who a launched engine is, read once it answers, as one record (launch.identity): the model to measure,
the claims checked, the answers a run keeps, and what fails the run at launch. Answered by
httpx.MockTransport in the shapes llama-server gave with -np 3 -c 4096 --alias tgt."""

import httpx
import pytest

from servebook.engines import get_engine
from servebook.launch.identity import identify_launched
from servebook.util.errors import EngineFailed
from tests.helpers.candidates import make_candidate

URL = "http://engine.test:8080"
PROPS = {"total_slots": 3, "model_alias": "tgt", "model_path": "/models/tiny-target-r1.gguf",
         "default_generation_settings": {"n_ctx": 1536}, "build_info": "b6000-0c1e570"}
ROUTES = {"/v1/models": {"data": [{"id": "tgt"}]}, "/props": PROPS,
          "/slots": [{"id": i, "n_ctx": 1536, "speculative": False} for i in range(3)]}
ARGV = ["llama-server", "-m", "/models/tiny-target-r1.gguf", "-np", "3", "-c", "4096", "--api-key", "***"]


def llama_server(seen: list[str]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        body = ROUTES.get(request.url.path)
        return httpx.Response(200, json=body) if body is not None else httpx.Response(404)
    return httpx.MockTransport(answer)


def identify(served_name=None, seen=None, **knobs):
    model = {"path": "/models/tiny-target-r1.gguf", **({"served_name": served_name} if served_name else {})}
    candidate = make_candidate(model=model, knobs={"max_running_requests": 3, "context_length": 4096, **knobs})
    identity = identify_launched(candidate, get_engine("llamacpp"), URL, {}, ARGV,
                                 transport=llama_server(seen if seen is not None else []))
    return candidate, identity


def test_a_launched_engine_is_identified_once_with_what_the_run_keeps():
    candidate, identity = identify()
    assert identity.served_model == "tgt" and identity.not_served is None
    claims = identity.verification.claims
    assert claims["model"].status == "verified" and claims["knobs.max_running_requests"].status == "verified"
    assert identity.settings["max_running_requests"] == 3, "the settings the endpoint is measured with"
    assert set(identity.kept()) == {"self_report.json", "server_info.json"}
    assert identity.kept()["server_info.json"]["path"] == "/props"
    assert identity.version == "b6000-0c1e570"
    identity.check(candidate, identity.version)  # serves the model, no pinned release: nothing to refuse
    with pytest.raises(AttributeError):
        identity.served_model = "another"  # built once: a stage cannot fill it in afterwards


def test_a_model_the_engine_does_not_serve_fails_the_run_at_launch_with_its_report_kept():
    seen: list[str] = []
    candidate, identity = identify(served_name="other", seen=seen)
    assert identity.served_model is None and "does not serve 'other'" in identity.not_served
    assert identity.verification.claims, "what the engine reported stays with the failed run"
    assert set(identity.kept()) == {"self_report.json"}, "its info path is not asked once the model is refused"
    with pytest.raises(EngineFailed) as failed:
        identity.check(candidate, None)
    assert (failed.value.cause, failed.value.stage) == ("model_not_served", "launch")


def test_another_release_than_the_pinned_one_fails_the_run_at_launch():
    candidate, identity = identify()
    pinned = candidate.with_overrides({"pins.engine_version": "b7000"})
    with pytest.raises(EngineFailed) as failed:
        identity.check(pinned, identity.version)
    assert (failed.value.cause, failed.value.stage) == ("version_mismatch", "launch")
    assert "'b7000'" in failed.value.message and "'b6000-0c1e570'" in failed.value.message
    identity.check(candidate.with_overrides({"pins.engine_version": "b6000"}), identity.version)
    identity.check(pinned, None)  # an engine that reports no version is not checked
