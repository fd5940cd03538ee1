"""servebook's one engine HTTP client, answered by httpx.MockTransport as httpx's own tests do; the one mapping of
engine and transport errors; and llama.cpp's per-request timings read behind its adapter."""

import httpx
import openai
import pytest

from servebook.config.candidate import Candidate
from servebook.config.errors import InputError
from servebook.engines import get_engine
from servebook.engines.http_client import TRANSPORT_ERRORS, EngineClient, engine_error
from servebook.launch.process import EngineProcess
from servebook.launch.verify import has_tokenizer, read_server_info, verify_attached
from servebook.measure.transport.client import RequestRecord, StreamRequest, _record_chunk
from servebook.present.claims import claim_text
from servebook.util.errors import EngineFailed

URL = "http://engine.test:8080"
# What llama-server answered with -np 3 -c 4096 --alias tgt (the shapes tests/unit/launch/test_verify.py records).
PROPS = {"total_slots": 3, "model_alias": "tgt", "model_path": "/models/tiny-target-r1.gguf",
         "default_generation_settings": {"n_ctx": 1536}}
ROUTES = {"/health": {"status": "ok"}, "/v1/models": {"data": [{"id": "tgt"}]}, "/props": PROPS,
          "/slots": [{"id": i, "n_ctx": 1536, "speculative": False} for i in range(3)]}


def llama_server(seen: list[httpx.Request] | None = None, routes=ROUTES) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        body = routes.get(request.url.path)
        return httpx.Response(200, json=body) if body is not None else httpx.Response(404)
    return httpx.MockTransport(answer)


def attached(slots: int) -> Candidate:
    return Candidate.model_validate({
        "engine": "llamacpp", "model": {"path": "/models/tiny-target-r1.gguf"},
        "knobs": {"max_running_requests": slots, "context_length": 4096},
        "launch": {"mode": "attach", "url": URL, "ready_timeout_s": 1}})


def test_attaching_verifies_claims_against_the_engine_answering_through_the_transport():
    seen: list[httpx.Request] = []
    model, record = verify_attached(attached(3), get_engine("llamacpp"), URL, {"Authorization": "Bearer k"},
                                    "/models/tiny-target-r1.gguf", transport=llama_server(seen))
    assert model == "tgt"
    assert claim_text(record.claims["knobs.max_running_requests"]) == "verified: 3"
    assert record.claims["knobs.context_length"].status == "verified"  # llama.cpp's per-slot arithmetic
    assert {r.url.path for r in seen} >= {"/health", "/v1/models", "/props", "/slots"}
    assert all(r.headers["Authorization"] == "Bearer k" for r in seen), "every request carries the key"
    with pytest.raises(InputError, match="knobs.max_running_requests: the candidate says 4, the server reports 3"):
        verify_attached(attached(4), get_engine("llamacpp"), URL, {}, None, transport=llama_server())


def test_server_info_readiness_and_the_tokenizer_probe_go_through_the_same_client(tmp_path):
    assert read_server_info(get_engine("llamacpp"), URL, {}, transport=llama_server())["path"] == "/props"
    process = EngineProcess([], get_engine("llamacpp"), URL, tmp_path / "engine.log", transport=llama_server())
    assert process.wait_ready(1.0) < 1.0
    openai_engine = get_engine("openai")  # the one engine whose tokenizer servebook asks about
    tokenizing = llama_server(routes={"/tokenize": {"tokens": [1, 2]}})
    assert has_tokenizer(openai_engine, URL, {}, "m", transport=tokenizing)
    assert not has_tokenizer(openai_engine, URL, {}, "m", transport=llama_server(routes={}))


def test_a_transport_failure_is_nothing_answered_never_an_exception():
    def refuse(request):
        raise httpx.ConnectError("refused", request=request)
    client = EngineClient(URL, transport=httpx.MockTransport(refuse))
    assert client.get("/health") is None and not client.answers("/health") and client.bodies(("/props",)) == {}


def status_error(code: int) -> httpx.HTTPStatusError:
    request = httpx.Request("POST", f"{URL}/tokenize")
    return httpx.HTTPStatusError("boom", request=request, response=httpx.Response(code, request=request))


def test_engine_errors_are_mapped_in_one_place_by_their_codes():
    died = EngineFailed("out_of_memory", "CUDA out of memory")
    lost = httpx.ConnectError("All connection attempts failed")
    assert all(isinstance(e, TRANSPORT_ERRORS) for e in (lost, status_error(500), openai.APIConnectionError(
        request=httpx.Request("GET", URL)), OSError()))
    assert engine_error(lost, failure=died) is died, "a dead engine's own diagnosis comes first"
    assert engine_error(lost) is lost, "a lost connection to a living engine is not blamed on it"
    crashed = engine_error(status_error(500))
    assert isinstance(crashed, EngineFailed) and crashed.cause == "crash" and "answered 500" in crashed.message
    assert isinstance(engine_error(status_error(401)), InputError)
    sdk = openai.APIStatusError("forbidden", response=httpx.Response(403, request=httpx.Request("GET", URL)),
                                body=None)
    assert isinstance(engine_error(sdk), InputError)


class Chunk:
    """A streamed chunk as the SDK gives it: no choices, no usage, and the engine's extra fields."""

    choices: list = []
    usage = None

    def __init__(self, extra):
        self.model_extra = extra


def test_llamacpps_own_timings_are_read_by_its_adapter_and_no_other_engines():
    extra = {"timings": {"prompt_ms": 12.5, "predicted_per_second": 80.0, "draft_n": 6, "draft_n_accepted": 4}}
    for engine, expected in (("llamacpp", 12.5), ("vllm", None)):
        record = RequestRecord("r", "c", 1, "prose", 8, t_send=0.0)
        request = StreamRequest("m", 8, server_timings=get_engine(engine).server_timings)
        _record_chunk(record, Chunk(extra), 1.0, 0, chat=True, keep_chunk_times=False,
                      server_timings=request.server_timings)
        assert record.server_prompt_ms == expected
    assert get_engine("llamacpp").server_timings(extra).draft_accepted == 4
