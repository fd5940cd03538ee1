"""A random-weight checkpoint shaped as a reasoning model: the thinking markers are whole tokens of a vocabulary of
the same size (the weights are the source's), and its chat template opens the thinking block in the prompt, or
closes it at once when a request turns thinking off, as DeepSeek-R1's template does."""

import json

import jinja2
import pytest
from tokenizers import Tokenizer

from servebook.models.hf_checkpoints import ensure_hf_checkpoint
from servebook.models.hf_thinking import THINK_END, THINK_START, write_thinking_checkpoint
from servebook.models.model_specs import TINY_HF_MODELS

SPEC = TINY_HF_MODELS["target"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SERVEBOOK_CACHE", str(tmp_path_factory.mktemp("cache")))
        source = ensure_hf_checkpoint(SPEC)
        yield source, write_thinking_checkpoint(source)


def test_the_markers_are_whole_tokens_of_a_vocabulary_of_the_same_size(checkpoints):
    source, thinking = checkpoints
    plain, marked = Tokenizer.from_file(str(source / "tokenizer.json")), Tokenizer.from_file(str(thinking / "tokenizer.json"))
    assert marked.get_vocab_size() == plain.get_vocab_size() == SPEC.vocab_size
    start, end = marked.token_to_id(THINK_START), marked.token_to_id(THINK_END)
    assert (start, end) == (SPEC.vocab_size - 2, SPEC.vocab_size - 1)
    ids = marked.encode(f"{THINK_START}\nhello{THINK_END}").ids
    assert ids[0] == start and ids[-1] == end and marked.decode(ids, skip_special_tokens=False).startswith(THINK_START)
    text = "The quick brown fox."
    assert marked.encode(text).ids == plain.encode(text).ids, "ordinary text tokenizes as before"
    assert (thinking / "model.safetensors").stat().st_ino == (source / "model.safetensors").stat().st_ino
    assert json.loads((thinking / "servebook.json").read_text())["thinking"]["markers"] == [THINK_START, THINK_END]


def test_the_template_opens_the_block_unless_thinking_is_off(checkpoints):
    _, thinking = checkpoints
    template = jinja2.Environment().from_string(
        json.loads((thinking / "tokenizer_config.json").read_text())["chat_template"])
    messages = [{"role": "user", "content": "hi"}]
    assert template.render(messages=messages, add_generation_prompt=True).endswith("<|im_start|>assistant\n<think>\n")
    off = template.render(messages=messages, add_generation_prompt=True, enable_thinking=False)
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert template.render(messages=messages, add_generation_prompt=False).endswith("hi<|im_end|>\n")
