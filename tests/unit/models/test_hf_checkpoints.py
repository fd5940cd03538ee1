"""Random-weight Hugging Face checkpoints: the files vLLM and SGLang load, written without torch, and the model
references that resolve to them for GPU engines (and to the GGUF for llama.cpp)."""

import json
import math
import struct
from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from servebook.engines import get_engine
from servebook.launch.preflight import resolve_model_path
from servebook.models import hf_checkpoints
from servebook.models.hf_checkpoints import (
    SPECIAL_TOKENS,
    bf16_bits,
    build_tokenizer,
    ensure_hf_checkpoint,
    hf_checkpoint_path,
    hf_config,
    hf_tensor_shapes,
    is_current,
    write_hf_checkpoint,
)
from servebook.models.model_specs import RANDOM_MODELS, TINY_HF_MODELS, models_dir
from servebook.models.random_models import (
    custom_spec,
    ensure_generated,
    generated_path,
    generated_spec,
    model_file_name,
    random_model_path,
)
from servebook.util.paths import repo_data_dir
from tests.helpers.candidates import QUIET, make_candidate

TARGET = TINY_HF_MODELS["target"]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string"}}}}}]
CONVERSATION = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None,
     "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": '{"celsius": 21}'},
]
TEXT = "The quick brown fox.\n\ndef f(x):\n    return x ** 2  # naïve ünïcödé, 日本語 and an emoji 🙂"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        root = tmp_path_factory.mktemp("cache")
        patch.setenv("SERVEBOOK_CACHE", str(root))
        yield root


@pytest.fixture(scope="module")
def target(cache):
    return ensure_hf_checkpoint(TARGET)


def read_header(path):
    with open(path, "rb") as f:
        length = struct.unpack("<Q", f.read(8))[0]
        return length, json.loads(f.read(length))


def test_the_safetensors_file_holds_every_tensor_in_bf16_at_its_shape(target):
    from safetensors import safe_open

    path = target / "model.safetensors"
    length, header = read_header(path)
    assert length % 8 == 0 and header.pop("__metadata__") == {"format": "pt"}
    shapes = hf_tensor_shapes(TARGET)
    assert list(header) == list(shapes) and all(entry["dtype"] == "BF16" for entry in header.values())
    assert {name: tuple(entry["shape"]) for name, entry in header.items()} == shapes
    ends = [entry["data_offsets"] for entry in header.values()]
    assert ends[0][0] == 0 and all(a[1] == b[0] for a, b in zip(ends, ends[1:], strict=False))
    assert path.stat().st_size == 8 + length + ends[-1][1] == 8 + length + 2 * TARGET.parameters()
    assert shapes["model.embed_tokens.weight"] == (4096, 256) and "lm_head.weight" not in shapes  # tied
    assert shapes["model.layers.0.self_attn.k_proj.weight"] == (128, 256)  # 2 KV heads of 64
    with safe_open(str(path), framework="numpy") as f:  # numpy cannot hold bf16: shapes only
        assert {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()} == shapes


def test_weights_are_seeded_noise_and_norms_are_ones(target):
    torch = pytest.importorskip("torch")
    from safetensors import safe_open

    with safe_open(str(target / "model.safetensors"), framework="pt") as f:
        embedding = f.get_tensor("model.embed_tokens.weight")
        assert embedding.dtype == torch.bfloat16 and abs(embedding.float().std().item() - 0.02) < 0.001
        assert torch.equal(f.get_tensor("model.norm.weight"), torch.ones(256, dtype=torch.bfloat16))
        assert torch.equal(f.get_tensor("model.layers.3.post_attention_layernorm.weight"),
                           torch.ones(256, dtype=torch.bfloat16))


def test_bf16_rounds_to_nearest_even_as_torch_does():
    torch = pytest.importorskip("torch")
    values = np.random.default_rng(0).standard_normal(100_000, dtype=np.float32) * 0.02
    ties = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 0.0, -0.0, 1e-40], dtype=np.float32)
    for chunk in (values, ties):
        expected = torch.from_numpy(chunk).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        assert np.array_equal(bf16_bits(chunk), expected)


def test_the_tokenizer_has_exactly_the_vocabulary_asked_and_every_id_decodes(target):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(target / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == TARGET.vocab_size == 4096
    assert [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS] == list(range(3))
    config = json.loads((target / "config.json").read_text())
    assert config["vocab_size"] == 4096 and (config["bos_token_id"], config["eos_token_id"]) == (0, 2)
    assert tokenizer.decode(tokenizer.encode(TEXT).ids) == TEXT
    decoded = [tokenizer.decode([i], skip_special_tokens=False) for i in range(4096)]
    assert all(decoded) and decoded[2] == "<|im_end|>"


def test_the_presets_tokenizer_is_qwen2_sized_and_real_text_tokenizes_compactly():
    tokenizer = build_tokenizer(RANDOM_MODELS["1b"].vocab_size)
    assert tokenizer.get_vocab_size() == 151936
    prose = (repo_data_dir() / "corpora" / "prose.txt").read_text()
    ids = tokenizer.encode(prose).ids
    assert len(ids) < len(prose) / 4 and tokenizer.decode(ids) == prose
    assert tokenizer.decode(tokenizer.encode(TEXT).ids) == TEXT
    assert all(tokenizer.decode([i]) for i in range(3, 151936, 997))  # grown tokens decode too


def test_the_chat_template_renders_chatml_with_tools_and_tool_calls(target):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(target)
    assert len(tokenizer) == 4096 and tokenizer.eos_token == "<|im_end|>"
    text = tokenizer.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nAnswer briefly.\n\n# Tools")
    assert json.dumps(TOOLS[0]) in text and text.count("<|im_start|>system") == 1
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n' \
           '</tool_call><|im_end|>\n' in text
    assert '<|im_start|>tool\n<tool_response>\n{"celsius": 21}\n</tool_response><|im_end|>\n' in text
    assert text.endswith("<|im_start|>assistant\n")
    plain = tokenizer.apply_chat_template(CONVERSATION[1:2], tokenize=False)
    assert plain == "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
    assert tokenizer.apply_chat_template(CONVERSATION[1:2], tokenize=True, add_generation_prompt=True)


def test_transformers_loads_the_checkpoint_and_generates(target):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, info = AutoModelForCausalLM.from_pretrained(target, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    ids = AutoTokenizer.from_pretrained(target)(TEXT, return_tensors="pt").input_ids
    with torch.no_grad():
        assert model(ids).logits.shape == (1, ids.shape[1], 4096)
        out = model.generate(ids, max_new_tokens=4, min_new_tokens=4, do_sample=False)
    assert out.shape == (1, ids.shape[1] + 4)


def test_the_same_spec_writes_the_same_bytes(tmp_path):
    spec = TINY_HF_MODELS["draft"]
    first, second = write_hf_checkpoint(spec, tmp_path / "a"), write_hf_checkpoint(spec, tmp_path / "b")
    for name in ("model.safetensors", "tokenizer.json", "config.json", "tokenizer_config.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes()
    other = write_hf_checkpoint(replace(spec, seed=99), tmp_path / "c")
    assert (other / "model.safetensors").read_bytes() != (first / "model.safetensors").read_bytes()
    assert (other / "tokenizer.json").read_bytes() == (first / "tokenizer.json").read_bytes()  # a draft shares it


def test_a_large_models_tensors_are_cut_from_the_pool_deterministically(tmp_path, monkeypatch):
    """The recipe of the presets (a pool of noise cut per tensor), on the tiny shape with a pool smaller than its
    embedding, so that a tensor wraps around the pool."""
    monkeypatch.setattr(hf_checkpoints, "EVERY_WEIGHT_DRAWN_BELOW", 0)
    monkeypatch.setattr(hf_checkpoints, "NOISE_POOL", 1 << 16)
    first, second = write_hf_checkpoint(TARGET, tmp_path / "a"), write_hf_checkpoint(TARGET, tmp_path / "b")
    data = (first / "model.safetensors").read_bytes()
    assert data == (second / "model.safetensors").read_bytes()
    length, header = read_header(first / "model.safetensors")
    begin, end = header["model.embed_tokens.weight"]["data_offsets"]
    embedding = np.frombuffer(data[8 + length + begin:8 + length + end], dtype="<u2")
    assert len(data) == 8 + length + 2 * TARGET.parameters()
    assert np.array_equal(embedding[:1 << 16], embedding[1 << 16:2 << 16])  # the pool, once round and again


def test_an_outdated_checkpoint_is_rewritten_and_nothing_is_left_behind(cache):
    spec = TINY_HF_MODELS["draft"]
    path = ensure_hf_checkpoint(spec)
    record = json.loads((path / "servebook.json").read_text())
    (path / "servebook.json").write_text(json.dumps({**record, "recipe": 0}))
    assert not is_current(path, spec)
    assert ensure_hf_checkpoint(spec) == path and is_current(path, spec)
    assert not [p for p in models_dir().iterdir() if p.name.startswith(".")]


def test_the_1b_preset_has_llama_3_2_1b_s_shape_and_size():
    spec = RANDOM_MODELS["1b"]
    config = hf_config(spec)
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert (config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]) == (2048, 8192, 16)
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (32, 8, 64)
    assert config["vocab_size"] == 151936 and config["max_position_embeddings"] == 131072
    assert config["tie_word_embeddings"] and config["torch_dtype"] == config["dtype"] == "bfloat16"
    shapes = hf_tensor_shapes(spec)
    assert len(shapes) == 16 * 9 + 2 and shapes["model.layers.15.mlp.down_proj.weight"] == (2048, 8192)
    llama_3_2_1b = 1_235_814_400  # its published count (tied embeddings), with Llama 3's vocabulary of 128256
    assert sum(math.prod(s) for s in shapes.values()) == spec.parameters() == llama_3_2_1b + (151936 - 128256) * 2048
    assert 2 * spec.parameters() / 1e9 == pytest.approx(2.57, abs=0.01)  # GB of bf16 in model.safetensors
    assert hf_checkpoint_path(spec).name == "random-1b-d2048-l16-f8192-h32-kv8-v151936-bf16-r1-hf"


def test_a_gpu_engine_s_reference_names_the_checkpoint_and_llamacpp_s_the_gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEBOOK_CACHE", str(tmp_path))
    assert get_engine("vllm").model_format == get_engine("sglang").model_format == "hf"
    assert get_engine("llamacpp").model_format == "gguf"
    draft = RANDOM_MODELS["draft"]
    assert generated_path("random:draft", get_engine("vllm").model_format) == hf_checkpoint_path(draft)
    assert generated_path("random:draft", get_engine("llamacpp").model_format) == random_model_path(draft)
    assert model_file_name("random:draft", "hf") == str(tmp_path / "models" / hf_checkpoint_path(draft).name)
    assert model_file_name("random:draft").endswith(".gguf")  # what callers that name no format get
    assert generated_spec("tiny:target", "hf") == TARGET and generated_spec("tiny:target").vocab_size == 151936
    assert model_file_name("org/model", "hf") == "org/model"
    assert not (tmp_path / "models").exists()  # naming a model writes nothing


def test_a_custom_shape_is_found_in_the_format_it_was_written_in(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEBOOK_CACHE", str(tmp_path))
    spec = replace(custom_spec("mini", layers=1, width=64, heads=2, kv_heads=1, ffn=128), vocab_size=512)
    path = ensure_hf_checkpoint(spec)
    assert generated_path("random:mini", "hf") == path and ensure_generated("random:mini", QUIET, "hf") == path
    with pytest.raises(KeyError, match="--format gguf"):
        generated_path("random:mini")


def test_preflight_writes_a_gpu_engine_s_tiny_model_as_a_checkpoint(cache):
    resolved = resolve_model_path("tiny:draft", "knobs.drafter.model", QUIET, "hf")
    assert resolved == str(hf_checkpoint_path(TINY_HF_MODELS["draft"])) and is_current(
        hf_checkpoint_path(TINY_HF_MODELS["draft"]), TINY_HF_MODELS["draft"])


def test_models_tiny_writes_checkpoints_without_the_llamacpp_build(cache, monkeypatch):
    from servebook.cli import app
    from servebook.models import random_models

    def no_build(*args, **kwargs):
        raise AssertionError("a Hugging Face checkpoint must not need the llama.cpp build")

    monkeypatch.setattr(random_models, "install_llamacpp", no_build)
    monkeypatch.setattr(random_models, "find_llamacpp", no_build)
    result = CliRunner().invoke(app, ["models", "tiny", "--format", "hf"])
    assert result.exit_code == 0, result.output
    printed = "".join(result.output.splitlines())  # unwrapped
    assert f"tiny:target  {hf_checkpoint_path(TARGET)}  (9 MB, hf)" in printed
    refused = CliRunner().invoke(app, ["models", "tiny", "--format", "onnx"])
    assert refused.exit_code != 0 and "gguf, hf or both" in " ".join(refused.output.split())


def test_preflight_gives_a_vllm_candidate_checkpoints_for_its_model_and_its_draft(cache):
    from servebook.launch.gpu_inventory import Inventory
    from servebook.launch.preflight import preflight

    candidate = make_candidate("vllm", model={"path": "tiny:target"}, launch={"command": ["vllm"]},
                               knobs={"drafter": {"kind": "draft_model", "model": "tiny:draft", "max_draft_tokens": 2}})
    paths = preflight(candidate, QUIET, inventory=Inventory([], note="no GPU here"))
    assert paths.model_path == str(hf_checkpoint_path(TARGET))
    assert paths.draft_path == str(hf_checkpoint_path(TINY_HF_MODELS["draft"]))
