"""The tiny random-weight model behaves like a real model where servebook relies on it."""

import json

import httpx
import pytest

from servebook.engines import get_engine
from servebook.launch.preflight import preflight
from servebook.launch.process import EngineProcess, free_port
from servebook.util.progress import Reporter
from tests.helpers.candidates import tiny_candidate

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(llama_install, tmp_path_factory):
    candidate = tiny_candidate()
    paths = preflight(candidate, Reporter(quiet=True))
    port = free_port()
    argv = get_engine("llamacpp").argv(candidate, port=port, model_path=paths.model_path, draft_path=None,
                                       binary=paths.engine_binary, backend=paths.backend)
    engine = EngineProcess(argv, get_engine("llamacpp"), f"http://127.0.0.1:{port}",
                           tmp_path_factory.mktemp("tiny") / "engine.log")
    with engine:
        engine.wait_ready(60)
        yield engine.base_url


def test_real_text_tokenizes_like_text(server):
    tokens = httpx.post(f"{server}/tokenize", json={"content": "The lighthouse keeper kept two logbooks."}).json()["tokens"]
    assert 6 <= len(tokens) <= 12  # a word-level BPE vocabulary, not bytes


def test_json_schema_is_honoured(server):
    # Bounded values only: a random model inside a free string or number may never close it.
    schema = {"type": "object", "properties": {"city": {"enum": ["Oslo", "Lima", "Pune"]}, "open": {"type": "boolean"}},
              "required": ["city", "open"], "additionalProperties": False}
    response = httpx.post(f"{server}/v1/chat/completions", timeout=60, json={
        "messages": [{"role": "user", "content": "Give a city and a count as JSON."}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
        "max_tokens": 200, "temperature": 0,
    }).json()
    content = json.loads(response["choices"][0]["message"]["content"])
    assert set(content) == {"city", "open"} and content["city"] in {"Oslo", "Lima", "Pune"}
    assert isinstance(content["open"], bool)


def test_forced_length_is_exact(server):
    response = httpx.post(f"{server}/v1/chat/completions", timeout=60, json={
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 37, "ignore_eos": True}).json()
    assert response["usage"]["completion_tokens"] == 37
    assert response["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("context_length, slots, kv_dtype", [(2048, 1, None), (8192, 3, None), (8192, 2, "q8_0")])
def test_memory_arithmetic_matches_the_kv_buffer_llamacpp_logs(llama_install, tmp_path, context_length, slots,
                                                               kv_dtype):
    from servebook.engines.sizing import ModelShape, check_against_engine

    knobs = {"context_length": context_length, "max_running_requests": slots, "kv_dtype": kv_dtype}
    candidate = tiny_candidate(knobs={k: v for k, v in knobs.items() if v is not None})
    paths = preflight(candidate, Reporter(quiet=True))
    port, adapter = free_port(), get_engine("llamacpp")
    log = tmp_path / "engine.log"
    argv = adapter.argv(candidate, port=port, model_path=paths.model_path, draft_path=None,
                        binary=paths.engine_binary, backend=paths.backend)
    with EngineProcess(argv, adapter, f"http://127.0.0.1:{port}", log) as engine:
        engine.wait_ready(60)
    logged = adapter.logged_kv_cache(log.read_text())
    assert logged is not None and logged.cells >= context_length
    check = check_against_engine(ModelShape.from_gguf(paths.model_path), logged.cells, logged.bytes, logged.k_type)
    assert check.agrees, check.row()  # within 1%
