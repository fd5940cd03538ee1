"""`servebook run --url`: a server told apart by what it says of itself, described as the candidate it runs."""

import httpx
import pytest

from servebook.config.errors import InputError
from servebook.engines import get_engine
from servebook.engines.http_client import EngineClient
from servebook.launch.discover import detect_engine, server_candidate
from servebook.launch.verify import read_self_report, verify_claims

URL = "http://127.0.0.1:8000"
# What llama-server 0.3.36 answered with -np 3 -c 4096 --alias tgt (tests/unit/launch/test_verify.py).
LLAMA = {"/v1/models": {"object": "list", "data": [{"id": "tgt", "object": "model", "owned_by": "llamacpp"}]},
         "/props": {"total_slots": 3, "model_alias": "tgt", "model_path": "/models/tiny-target-r1.gguf",
                    "default_generation_settings": {"n_ctx": 1536}},
         "/slots": [{"id": i, "n_ctx": 1536, "speculative": False} for i in range(3)]}
SGLANG_INFO = {"model_path": "org/model", "served_model_name": "org/model", "max_running_requests": 16,
               "chunked_prefill_size": 8192, "tp_size": 2, "context_length": 65536, "kv_cache_dtype": "bfloat16",
               "speculative_algorithm": None}
SGLANG = {"/v1/models": {"data": [{"id": "org/model", "owned_by": "sglang", "root": "org/model"}]},
          "/server_info": SGLANG_INFO}
VLLM_METRICS = ('vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",'
                'num_gpu_blocks="1000"} 1.0\nvllm:num_requests_running{model_name="m"} 0.0\n')
VLLM = {"/v1/models": {"data": [{"id": "m", "owned_by": "vllm", "root": "/models/llama-8b", "max_model_len": 8192}]},
        "/metrics": VLLM_METRICS}


def server(paths: dict, seen: list | None = None) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        body = paths.get(request.url.path)
        if body is None:
            return httpx.Response(404, json={"detail": "Not Found"})
        if isinstance(body, str):
            return httpx.Response(200, text=body)
        return httpx.Response(200, json=body)

    return httpx.MockTransport(answer)


@pytest.mark.parametrize("paths, engine", [(LLAMA, "llamacpp"), (SGLANG, "sglang"), (VLLM, "vllm")])
def test_the_engine_is_told_by_what_the_server_says_of_itself(paths, engine):
    assert detect_engine(EngineClient(URL, transport=server(paths)))[0] == engine


def test_without_owned_by_the_metrics_or_props_decide_and_nothing_known_is_openai():
    anonymous = {"data": [{"id": "m", "owned_by": "someone"}]}
    assert detect_engine(EngineClient(URL, transport=server({**VLLM, "/v1/models": anonymous}))) == (
        "vllm", "its /metrics are vllm:*")
    assert detect_engine(EngineClient(URL, transport=server({**LLAMA, "/v1/models": anonymous})))[0] == "llamacpp"
    engine, evidence = detect_engine(EngineClient(URL, transport=server({"/v1/models": anonymous})))
    assert engine == "openai" and "OpenAI-compatible" in evidence


def test_the_candidate_claims_what_the_server_reports_and_verifies_against_it():
    found = server_candidate(URL, transport=server(LLAMA))
    candidate = found.candidate
    assert (candidate.engine, candidate.launch.mode, candidate.launch.url) == ("llamacpp", "attach", URL)
    assert candidate.model.served_name == "tgt" and candidate.model.id == "/models/tiny-target-r1.gguf"
    assert candidate.knobs.max_running_requests == 3
    assert candidate.knobs.context_length is None  # per slot only: the total is not guessed
    assert candidate.name == "llamacpp-tgt" and found.evidence == "/v1/models says owned_by llamacpp"
    report = read_self_report(get_engine("llamacpp"), URL, {}, transport=server(LLAMA))
    claims, wrong = verify_claims(candidate, report, None)
    assert wrong == [] and claims["knobs.max_running_requests"].status == "verified"


def test_a_server_with_another_configuration_is_another_candidate():
    small = server_candidate(URL, transport=server(SGLANG)).candidate
    bigger = server_candidate(URL, transport=server(
        {**SGLANG, "/server_info": {**SGLANG_INFO, "chunked_prefill_size": 4096}})).candidate
    assert small.knobs.chunk_size == 8192 and small.knobs.tensor_parallel_size == 2
    assert small.knobs.context_length == 65536 and small.id != bigger.id
    assert small.id == server_candidate(URL, transport=server(SGLANG)).candidate.id


def test_a_drafter_is_named_where_the_engine_names_it_and_refused_where_it_cannot_be():
    ngram = {**SGLANG, "/server_info": {**SGLANG_INFO, "speculative_algorithm": "NGRAM"}}
    assert server_candidate(URL, transport=server(ngram)).candidate.knobs.drafter.kind == "ngram"
    eagle = {**SGLANG, "/server_info": {**SGLANG_INFO, "speculative_algorithm": "EAGLE3"}}
    with pytest.raises(InputError, match=r"runs a drafter \(eagle3\).*knobs.drafter"):
        server_candidate(URL, transport=server(eagle))


def test_several_models_need_one_named_and_the_flags_are_checked():
    two = {**VLLM, "/v1/models": {"data": [{"id": "a", "owned_by": "vllm"}, {"id": "b", "owned_by": "vllm"}]}}
    with pytest.raises(InputError, match="serves 2 models"):
        server_candidate(URL, transport=server(two))
    assert server_candidate(URL, served_name="b", transport=server(two)).candidate.model.served_name == "b"
    with pytest.raises(InputError, match="--engine 'vlm'"):
        server_candidate(URL, engine="vlm", transport=server(VLLM))
    with pytest.raises(InputError, match="--url"):
        server_candidate("127.0.0.1:8000", transport=server(VLLM))


def test_the_api_key_is_sent_and_only_its_variable_recorded(monkeypatch):
    monkeypatch.setenv("MY_SERVER_KEY", "sk-secret-123")
    seen: list = []
    candidate = server_candidate(URL, api_key_env="MY_SERVER_KEY", transport=server(VLLM, seen)).candidate
    assert all(r.headers["authorization"] == "Bearer sk-secret-123" for r in seen)
    assert "sk-secret-123" not in candidate.model_dump_json() and candidate.launch.api_key_env == "MY_SERVER_KEY"
    monkeypatch.delenv("MY_SERVER_KEY")
    with pytest.raises(InputError, match="MY_SERVER_KEY is not set"):
        server_candidate(URL, api_key_env="MY_SERVER_KEY", transport=server(VLLM))
