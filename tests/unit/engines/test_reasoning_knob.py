"""knobs.reasoning is passed as each engine takes it: vLLM and SGLang a server flag for the parser and per chat
request the template's switch and the effort, llama.cpp server flags only; a setting an engine cannot honour is
refused naming the field; it is part of the candidate's identity, and leaving it unset changes no earlier id."""

import pytest
from pydantic import ValidationError

from servebook.config.candidate import Candidate
from servebook.engines import get_engine
from servebook.engines.flags import on_command_line
from servebook.measure.transport.endpoint import Endpoint


def candidate(engine="vllm", **fields):
    model = {"path": "tiny:target"} if engine == "llamacpp" else {"id": "org/model", "revision": "abc123"}
    return Candidate.model_validate({"engine": engine, "model": model, **fields})


def argv(c: Candidate) -> list[str]:
    return get_engine(c.engine).argv(c, port=8000, model_path="m", draft_path=None)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_python_servers_take_the_parser_as_a_flag_and_the_switch_and_effort_per_chat_request(engine):
    c = candidate(engine, knobs={"reasoning": {"parser": "qwen3", "mode": "on", "effort": "high"}})
    line = argv(c)
    assert line[line.index("--reasoning-parser") + 1] == "qwen3"
    assert get_engine(engine).chat_extras(c) == {"chat_template_kwargs": {"enable_thinking": True},
                                                 "reasoning_effort": "high"}
    off = candidate(engine, knobs={"reasoning": {"mode": "off"}})
    assert "--reasoning-parser" not in argv(off)
    assert get_engine(engine).chat_extras(off) == {"chat_template_kwargs": {"enable_thinking": False}}
    assert on_command_line(line, get_engine(engine).flags["knobs.reasoning"]) == "--reasoning-parser qwen3"


def test_llamacpp_takes_every_reasoning_setting_as_a_server_flag():
    c = candidate("llamacpp", knobs={"reasoning": {"mode": "on", "effort": "low", "format": "deepseek",
                                                   "budget": 64}})
    line = argv(c)
    at = line.index("--reasoning")
    assert line[at:] == ["--reasoning", "on", "--reasoning-effort", "low", "--reasoning-format", "deepseek",
                         "--reasoning-budget", "64"]
    assert get_engine("llamacpp").chat_extras(c) == {}


def test_yaml_shorthands_read_as_the_model():
    # YAML 1.1 reads `reasoning: on` and `mode: off` as booleans; an effort alone means thinking on at that effort
    assert candidate(knobs={"reasoning": True}).knobs.reasoning.mode == "on"
    assert candidate(knobs={"reasoning": {"mode": False, "parser": "qwen3"}}).knobs.reasoning.mode == "off"
    high = candidate(knobs={"reasoning": "high"}).knobs.reasoning
    assert (high.mode, high.effort) == ("on", "high")


@pytest.mark.parametrize(("engine", "reasoning", "words"), [
    ("vllm", {"budget": 128}, "knobs.reasoning.budget is llama.cpp's --reasoning-budget; servebook sets no thinking "
                              "budget on vLLM"),
    ("sglang", {"format": "deepseek"}, "knobs.reasoning.format is llama.cpp's --reasoning-format; SGLang separates"),
    ("llamacpp", {"parser": "qwen3"}, "knobs.reasoning.parser: llama.cpp reads the reasoning syntax from the chat "
                                      "template"),
    ("vllm", {"mode": "off", "effort": "high"}, "knobs.reasoning.effort: with mode off the model does not reason"),
    ("llamacpp", {"mode": "off", "budget": 100}, "knobs.reasoning.budget: with mode off the model does not think"),
    ("vllm", {"effort": "none"}, "knobs.reasoning.effort"),
    ("vllm", {"parsr": "qwen3"}, "knobs.reasoning.parsr: unknown field (did you mean 'parser'?"),
    ("vllm", {"parser": "qwen3 --evil"}, "knobs.reasoning.parser"),
])
def test_a_setting_the_engine_cannot_honour_is_refused_naming_the_field(engine, reasoning, words):
    with pytest.raises(ValidationError) as refused:
        candidate(engine, knobs={"reasoning": reasoning})
    assert words in str(refused.value)


def test_a_pinned_release_refuses_a_parser_it_does_not_have():
    pinned = {"pins": {"engine_version": "0.5.23"}}
    assert candidate("sglang", knobs={"reasoning": {"parser": "qwen3"}}, **pinned).knobs.reasoning.parser == "qwen3"
    with pytest.raises(ValidationError, match="knobs.reasoning.parser: sglang 0.5.23 has no reasoning parser 'qwen9'"):
        candidate("sglang", knobs={"reasoning": {"parser": "qwen9"}}, **pinned)


def test_the_generic_engine_applies_no_reasoning_knob():
    with pytest.raises(ValidationError, match="knobs.reasoning: the generic openai engine cannot apply knobs"):
        candidate("openai", knobs={"reasoning": "on"}, launch={"mode": "attach", "url": "http://127.0.0.1:9"})


def test_the_knob_is_part_of_the_identity_and_unset_changes_no_id():
    plain = candidate()
    assert candidate(knobs={"reasoning": None}).id == plain.id
    ids = {candidate(knobs={"reasoning": r}).id for r in ({"mode": "on"}, {"mode": "off"}, {"parser": "qwen3"},
                                                          {"mode": "on", "effort": "low"})}
    assert len(ids) == 4 and plain.id not in ids


def test_an_earlier_studys_parser_in_extra_args_stands_until_the_knob_sets_one():
    assert candidate(extra_args=["--reasoning-parser", "glm47"]).extra_args == ["--reasoning-parser", "glm47"]
    assert candidate(knobs={"reasoning": {"mode": "on"}}, extra_args=["--reasoning-parser", "glm47"])
    with pytest.raises(ValidationError, match="--reasoning-parser conflicts with knobs.reasoning"):
        candidate(knobs={"reasoning": {"parser": "qwen3"}}, extra_args=["--reasoning-parser", "glm47"])
    with pytest.raises(ValidationError, match="--reasoning-budget conflicts with knobs.reasoning"):
        candidate("llamacpp", knobs={"reasoning": {"budget": 10}}, extra_args=["--reasoning-budget", "5"])


def test_only_chat_requests_carry_the_fields_and_the_candidates_own_request_fields_win():
    adapter = get_engine("vllm")
    c = candidate(knobs={"reasoning": {"mode": "on", "effort": "low"}})
    endpoint = Endpoint("http://e", adapter, chat_request_extras=adapter.chat_extras(c),
                        request_extras={"reasoning_effort": "high"})
    assert "chat_template_kwargs" not in endpoint.extras(8), "a completion of a token prompt carries none"
    body = endpoint.for_chat({**endpoint.extras(8), "chat_template_kwargs": {"custom": 1}})
    assert body["chat_template_kwargs"] == {"enable_thinking": True, "custom": 1}
    assert body["reasoning_effort"] == "high" and body["ignore_eos"] is True
