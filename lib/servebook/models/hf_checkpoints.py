"""Random-weight Hugging Face checkpoints (llama architecture) for the GPU engines, written with no download.

The same shapes as the GGUF models (model_specs), as a directory vLLM, SGLang and transformers load:
config.json, generation_config.json, model.safetensors (bf16, embedding tied to the LM head, as the
GGUFs have no output matrix either), a byte-level BPE tokenizer made on the spot with a ChatML chat
template, and servebook.json saying which recipe wrote it. Writing needs neither torch nor transformers
(GPU hosts have them, the writer need not): the safetensors file is written by hand, tensor by tensor,
from seeded noise, so the same spec gives the same bytes, and a 1B model is written in seconds.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import struct
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable

import numpy as np

from ..util.progress import Reporter
from ..util.resources import shipped
from .model_specs import EVERY_WEIGHT_DRAWN_BELOW, NOISE_POOL, ModelSpec, models_dir

if TYPE_CHECKING:
    from tokenizers import Tokenizer

HF_RECIPE = 1  # bumped when anything written here changes; in the directory's name and its servebook.json
HF_SUFFIX = "-hf"
RECORD = "servebook.json"
ENDOFTEXT, IM_START, IM_END = SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
#: the byte alphabet and the special tokens: the smallest vocabulary a byte-level BPE can have
MIN_VOCAB = 256 + len(SPECIAL_TOKENS)
#: seeds the merges that grow the tokenizer, apart from the weights' seed, so a target and its draft share it
TOKENIZER_SEED = 7
CORPORA = ("prose", "code")
NORM_SUFFIX = "norm.weight"
BF16_ONE = 0x3F80

# ChatML, with tools listed as JSON in the system turn and calls in <tool_call> tags (Hermes style).
CHAT_TEMPLATE = r"""{%- set system = messages[0].content if messages and messages[0].role == 'system' else none %}
{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if system %}{{- system + '\n\n' }}{%- endif %}
    {{- '# Tools\n\nYou may call one or more functions. Their signatures, as JSON, are within <tools></tools>:\n<tools>' }}
    {%- for tool in tools %}{{- '\n' + (tool | tojson) }}{%- endfor %}
    {{- '\n</tools>\n\nFor each call, return the function name and arguments as JSON within <tool_call></tool_call>:\n' }}
    {{- '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' }}
{%- elif system %}
    {{- '<|im_start|>system\n' + system + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == 'system' and loop.first %}
    {%- elif message.role == 'assistant' and message.tool_calls %}
        {{- '<|im_start|>assistant' }}
        {%- if message.content %}{{- '\n' + message.content }}{%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- set call = tool_call.function if tool_call.function is defined else tool_call %}
            {{- '\n<tool_call>\n{"name": "' + call.name + '", "arguments": ' }}
            {{- call.arguments if call.arguments is string else call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == 'tool' %}
        {{- '<|im_start|>tool\n<tool_response>\n' + (message.content or '') + '\n</tool_response><|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>' + message.role + '\n' + (message.content or '') + '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
"""


def hf_dirname(spec: ModelSpec) -> str:
    shape = f"d{spec.embedding_length}-l{spec.block_count}-f{spec.feed_forward_length}-h{spec.head_count}" \
            f"-kv{spec.head_count_kv}-v{spec.vocab_size}-bf16"
    return f"{spec.family}-{spec.name}-{shape}-r{HF_RECIPE}{HF_SUFFIX}"


def hf_checkpoint_path(spec: ModelSpec) -> Path:
    return models_dir() / hf_dirname(spec)


def ensure_hf_checkpoint(spec: ModelSpec, reporter: Reporter | None = None) -> Path:
    """The checkpoint directory of `spec`, written once (deterministically) and cached."""
    path = hf_checkpoint_path(spec)
    if not is_current(path, spec):
        reporter = reporter or Reporter(quiet=True)
        with reporter.task(f"write {spec.family} {spec.name} Hugging Face checkpoint ({spec.parameters() / 1e6:,.0f}M "
                           "parameters, bf16)"):
            write_hf_checkpoint(spec, path)
    return path


def write_hf_checkpoint(spec: ModelSpec, path: Path) -> Path:
    """Write `spec` to the directory `path` atomically: built in a temp directory beside it, renamed into place
    (over an outdated one, which is removed after)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        os.chmod(staging, 0o755)  # mkdtemp's is private, and an engine may run as another user (in a container)
        _write_files(spec, staging)
        if path.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{path.name}.old.", dir=path.parent))
            path.rename(retired / path.name)
            staging.rename(path)
            shutil.rmtree(retired)
        else:
            staging.rename(path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # what a failed write left
    return path


def is_current(path: Path, spec: ModelSpec) -> bool:
    """Whether `path` holds a checkpoint this recipe wrote for `spec` (an older recipe's or a partial copy's not)."""
    try:
        return json.loads((path / RECORD).read_text()) == _record(spec) and (path / "model.safetensors").is_file()
    except (OSError, ValueError):
        return False


def _record(spec: ModelSpec) -> dict[str, Any]:
    # The GGUF's dtype and recipe do not shape this checkpoint, so a change of theirs does not outdate it; an edit
    # of the corpora the tokenizer is trained on does.
    shape = {key: value for key, value in asdict(spec).items() if key not in ("dtype", "recipe")}
    corpora = hashlib.sha256("\0".join(_corpora()).encode()).hexdigest()
    return {"writer": "servebook random-weight Hugging Face checkpoint", "recipe": HF_RECIPE, "seed": spec.seed,
            "spec": shape, "corpora_sha256": corpora}


def _corpora() -> list[str]:
    return [shipped("corpora", f"{name}.txt").read_text() for name in CORPORA]


def _write_files(spec: ModelSpec, directory: Path) -> None:
    tokenizer = build_tokenizer(spec.vocab_size)
    ids = {token: tokenizer.token_to_id(token) for token in SPECIAL_TOKENS}
    if list(ids.values()) != list(range(len(SPECIAL_TOKENS))):
        raise RuntimeError(f"the tokenizer put its special tokens at {ids}, not first as the config says")
    tokenizer.save(str(directory / "tokenizer.json"))
    special = {"bos_token": ENDOFTEXT, "eos_token": IM_END, "pad_token": ENDOFTEXT,
               "additional_special_tokens": [IM_START, IM_END]}
    _write_json(directory / "special_tokens_map.json", special)
    _write_json(directory / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast", **special, "model_max_length": spec.context_length,
        "clean_up_tokenization_spaces": False, "chat_template": CHAT_TEMPLATE})
    _write_json(directory / "config.json", hf_config(spec))
    _write_json(directory / "generation_config.json", {
        "bos_token_id": ids[ENDOFTEXT], "eos_token_id": [ids[IM_END], ids[ENDOFTEXT]],
        "pad_token_id": ids[ENDOFTEXT]})
    _write_safetensors(spec, directory / "model.safetensors")
    _write_json(directory / RECORD, _record(spec))


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def hf_config(spec: ModelSpec) -> dict[str, Any]:
    """config.json of `spec`: a LlamaForCausalLM whose special token ids are the tokenizer's (its first three)."""
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": spec.embedding_length, "intermediate_size": spec.feed_forward_length,
        "num_hidden_layers": spec.block_count, "num_attention_heads": spec.head_count,
        "num_key_value_heads": spec.head_count_kv, "head_dim": spec.head_dim, "hidden_act": "silu",
        "max_position_embeddings": spec.context_length, "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0,
        "rope_scaling": None, "attention_bias": False, "mlp_bias": False, "vocab_size": spec.vocab_size,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "dtype": "bfloat16", "initializer_range": 0.02,
        "bos_token_id": SPECIAL_TOKENS.index(ENDOFTEXT), "eos_token_id": SPECIAL_TOKENS.index(IM_END),
        "pad_token_id": SPECIAL_TOKENS.index(ENDOFTEXT), "use_cache": True,
    }


def hf_tensor_shapes(spec: ModelSpec) -> dict[str, tuple[int, ...]]:
    """Every tensor of the checkpoint in file order, linear weights [out, in] as torch holds them."""
    d, ff = spec.embedding_length, spec.feed_forward_length
    d_q, d_kv = spec.head_dim * spec.head_count, spec.head_dim * spec.head_count_kv
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (spec.vocab_size, d)}
    for i in range(spec.block_count):
        layer = f"model.layers.{i}"
        shapes |= {
            f"{layer}.input_layernorm.weight": (d,),
            f"{layer}.self_attn.q_proj.weight": (d_q, d), f"{layer}.self_attn.k_proj.weight": (d_kv, d),
            f"{layer}.self_attn.v_proj.weight": (d_kv, d), f"{layer}.self_attn.o_proj.weight": (d, d_q),
            f"{layer}.post_attention_layernorm.weight": (d,),
            f"{layer}.mlp.gate_proj.weight": (ff, d), f"{layer}.mlp.up_proj.weight": (ff, d),
            f"{layer}.mlp.down_proj.weight": (d, ff),
        }
    shapes["model.norm.weight"] = (d,)
    return shapes


def _write_safetensors(spec: ModelSpec, path: Path) -> None:
    """The safetensors format by hand, since torch may be absent and numpy has no bf16: the header's length (8
    bytes, little-endian), the JSON header padded with spaces to a multiple of 8, then every tensor's bytes in
    order, streamed so that no tensor, let alone the model, is ever whole in memory."""
    shapes = hf_tensor_shapes(spec)
    header: dict[str, Any] = {}
    offset = 0
    for name, shape in shapes.items():
        end = offset + math.prod(shape) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, end]}
        offset = end
    header["__metadata__"] = {"format": "pt"}
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    write_noise = _noise_writer(spec)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for name, shape in shapes.items():
            if name.endswith(NORM_SUFFIX):
                f.write(np.full(math.prod(shape), BF16_ONE, dtype="<u2").data)
            else:
                write_noise(f, math.prod(shape))


def _noise_writer(spec: ModelSpec) -> Callable[[BinaryIO, int], None]:
    """What writes `count` bf16 values of std 0.02 noise seeded by the spec: a small model draws every value; a
    large one cuts each tensor from one pool at a seeded offset (the GGUF writer's recipe), in slices of the pool."""
    rng = np.random.default_rng(spec.seed)

    def drawn(count: int) -> np.ndarray:
        return bf16_bits(rng.standard_normal(count, dtype=np.float32) * np.float32(0.02))

    def write_drawn(f: BinaryIO, count: int) -> None:
        f.write(drawn(count).data)

    if spec.parameters() < EVERY_WEIGHT_DRAWN_BELOW:
        return write_drawn
    pool = drawn(NOISE_POOL)

    def write_cut(f: BinaryIO, count: int) -> None:
        start = int(rng.integers(0, pool.size))
        while count:
            piece = pool[start:start + count]
            f.write(piece.data)
            count -= piece.size
            start = 0

    return write_cut


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 values as bf16 bit patterns (little-endian uint16), rounded to nearest even as torch rounds
    (finite values only: a NaN's payload could carry into the sign)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    return ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype("<u2")


def build_tokenizer(vocab_size: int) -> "Tokenizer":
    """A GPT-2 style byte-level BPE of exactly `vocab_size` tokens, special tokens first: trained on the shipped
    corpora so that real text tokenizes compactly, then, where the corpora run out of pairs to merge, grown by
    seeded merges of two trained tokens into a new one. Every id decodes (to bytes, some of them not UTF-8)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    if vocab_size < MIN_VOCAB:
        raise ValueError(f"vocab_size {vocab_size}: a byte-level BPE has at least {MIN_VOCAB} tokens")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(_corpora(), trainer)
    data = json.loads(tokenizer.to_str())
    _grow_vocabulary(data["model"], vocab_size)
    grown = Tokenizer.from_str(json.dumps(data, ensure_ascii=False))
    if grown.get_vocab_size() != vocab_size:
        raise RuntimeError(f"the tokenizer came out with {grown.get_vocab_size()} tokens, not {vocab_size}")
    return grown


def _grow_vocabulary(model: dict[str, Any], vocab_size: int) -> None:
    """Append merges to a BPE model's JSON (vocab and merges) until it holds `vocab_size` tokens."""
    vocab: dict[str, int] = model["vocab"]
    merges: list[list[str]] = model["merges"]
    parts = sorted((token for token in vocab if token not in SPECIAL_TOKENS), key=vocab.__getitem__)
    # pairs of trained tokens only, so that tokens stay a few characters long; half of the pairs is plenty
    if vocab_size > len(vocab) + len(parts) ** 2 // 2:
        raise ValueError(f"vocab_size {vocab_size}: more than this recipe grows from {len(parts)} trained tokens")
    rng = np.random.default_rng(TOKENIZER_SEED)
    while len(vocab) < vocab_size:
        for first, second in rng.integers(0, len(parts), size=(vocab_size - len(vocab), 2)).tolist():
            token = parts[first] + parts[second]
            if token not in vocab:
                vocab[token] = len(vocab)
                merges.append([parts[first], parts[second]])
