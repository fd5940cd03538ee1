import pytest
from pydantic import ValidationError

from servebook.config import Plan
from servebook.config.secrets import redact_argv, redact_env
from servebook.engines import get_engine
from servebook.measure.prompts import corpus, decode_prompt, exact_length_prompt


def test_plan_rejects_unsorted_and_unknown():
    with pytest.raises(ValidationError, match="ascending"):
        Plan.model_validate({"decode": {"concurrency": [4, 1]}})
    with pytest.raises(ValidationError, match="categories"):
        Plan.model_validate({"decode": {"categories": ["poetry"]}})
    with pytest.raises(ValidationError, match="extra"):
        Plan.model_validate({"decod": {}})
    assert Plan().id == Plan(name="other name").id
    assert Plan().id != Plan.model_validate({"decode": {"output_tokens": 64}}).id


def test_exact_length_prompt():
    prompt = exact_length_prompt([1, 2, 3], [9, 9], 10)
    assert prompt == [9, 9, 1, 2, 3, 1, 2, 3, 1, 2]
    with pytest.raises(ValueError):
        exact_length_prompt([1], [9, 9, 9], 3)


def test_corpora_ship_and_prompts_are_unique():
    assert len(corpus("prose")) >= 8 and len(corpus("code")) >= 8
    a = decode_prompt("code", 0, "run:cell:0")[0]["content"]
    b = decode_prompt("code", 0, "run:cell:1")[0]["content"]
    assert a != b and a.startswith("[run:cell:0]")


@pytest.mark.parametrize("line,cause", [
    ("error: invalid argument: --definitely-not-a-flag", "bad_flag"),
    ("error: the argument has been removed: --draft-max", "bad_flag"),
    ("ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 999", "out_of_memory"),
    ("llama_model_load: error loading model: failed to open /x.gguf", "model_load"),
    ("couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080", "port_in_use"),
])
def test_failure_classification(line, cause):
    result = get_engine("llamacpp").classify_failure(f"some banner\n{line}\nmore", exit_code=1)
    assert result.cause == cause
    assert line.strip() in result.message


def test_crash_without_signature():
    adapter = get_engine("llamacpp")
    assert adapter.classify_failure("all fine", exit_code=-9).cause == "crash"
    assert "signal 9" in adapter.classify_failure("all fine", exit_code=-9).message


def test_secrets_are_redacted():
    assert redact_argv(["x", "--api-key", "sk-123", "--port", "1"]) == ["x", "--api-key", "***", "--port", "1"]
    assert redact_argv(["--api-key=sk-1"]) == ["--api-key=***"]
    assert redact_env({"HF_TOKEN": "t", "OPENAI_API_KEY": "k", "OMP_NUM_THREADS": "2"}) == {
        "HF_TOKEN": "***", "OPENAI_API_KEY": "***", "OMP_NUM_THREADS": "2"}


def test_drafter_the_engine_cannot_use_is_a_model_load_failure():
    log = ("0.01.9 E srv    load_model: failed to initialize speculative decoding context: "
           "draft model is not eagle3 (expected 3 extract layers, got 0)\n"
           "0.01.9 E srv  llama_server: exiting due to model loading error")
    result = get_engine("llamacpp").classify_failure(log, exit_code=1)
    assert result.cause == "model_load" and "draft model is not eagle3" in result.message


def test_llamacpp_error_lines_are_the_E_level_ones():
    log = ("0.00.695.172 I common_speculative_init_result: loading draft model 'd.gguf'\n"
           "0.00.916.810 E srv    load_model: failed to initialize speculative decoding context\n"
           "0.00.917.000 W srv    something about errors in general\n")
    assert get_engine("llamacpp").error_lines(log) == [
        "0.00.916.810 E srv    load_model: failed to initialize speculative decoding context"]
