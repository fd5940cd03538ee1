"""Memory arithmetic: what a model needs, so a GPU budget says how many tokens and requests fit.

From a model's shape (a Hugging Face `config.json` or GGUF metadata): weight bytes, KV bytes per
token (attention layers x KV heads x head dim x 2 for K and V x element size; for latent
attention, DeepSeek's MLA, the latent and its rotary key per layer, plus a sparse-attention
indexer key where the model has one), per-request recurrent state where the model has
linear-attention layers (Mamba, Gated DeltaNet, KDA), and from those the largest token pool and
the most concurrent requests at a context length within a memory budget, for every
tensor-parallel width of a host (replicas versus wider TP). Tensor parallelism splits KV heads
and recurrent-state heads across GPUs, but every GPU keeps the whole latent of an MLA layer.

The arithmetic is checked, not trusted: `check_against_engine` compares it with the KV buffer
llama.cpp logs when it loads a model (`llama_kv_cache: size = ... (N cells, L layers, S/S seqs)`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._base import EngineAdapter

# Bytes per element of the KV cache types the engines name; llama.cpp's block types carry a scale
# per 32 elements (q8_0: 34 bytes per 32 values).
KV_DTYPE_BYTES = {"f32": 4.0, "float32": 4.0, "f16": 2.0, "float16": 2.0, "bf16": 2.0, "bfloat16": 2.0,
                  "auto": 2.0, "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "q8_0": 34 / 32, "q5_1": 24 / 32,
                  "q5_0": 22 / 32, "iq4_nl": 18 / 32, "q4_1": 20 / 32, "q4_0": 18 / 32}
#: words in a `layer_types` entry that mark a layer keeping a fixed state instead of a KV cache
RECURRENT_LAYER_WORDS = ("linear", "mamba", "kda", "deltanet", "recurrent")
WEIGHT_DTYPE_BYTES = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
GIB = 2**30


def kv_element_bytes(kv_dtype: str | None) -> float:
    name = (kv_dtype or "f16").lower()
    if name not in KV_DTYPE_BYTES:
        raise ValueError(f"unknown KV cache type {kv_dtype!r}; known: {', '.join(sorted(KV_DTYPE_BYTES))}")
    return KV_DTYPE_BYTES[name]


@dataclass(frozen=True)
class ModelShape:
    name: str
    layers: int
    attention_layers: int  # layers that keep a KV cache (all of them, except in hybrid models)
    kv_heads: int
    head_dim: int
    weight_bytes: int
    context_length: int | None = None
    #: per request, whatever the context: the state of linear-attention / SSM layers (hybrid models)
    recurrent_state_bytes: int = 0
    source: str = ""
    #: latent attention (MLA): values each attention layer keeps per token (latent + rotary key), instead of K and V
    latent_values: int = 0
    #: sparse attention's indexer key per token per attention layer (DeepSeek's DSA), kept at 16 bits at most
    indexer_values: int = 0

    def kv_bytes_per_token(self, kv_dtype: str | None = None, tensor_parallel: int = 1) -> float:
        """KV bytes one token costs a replica of `tensor_parallel` GPUs: split heads once, a latent on every GPU."""
        element = kv_element_bytes(kv_dtype)
        if self.latent_values:
            indexer = self.indexer_values * min(element, 2.0)
            return tensor_parallel * self.attention_layers * (self.latent_values * element + indexer)
        return self.attention_layers * self.kv_heads * self.head_dim * 2 * element

    def indexer_bytes_per_token(self, kv_dtype: str | None = None) -> float:
        return self.attention_layers * self.indexer_values * min(kv_element_bytes(kv_dtype), 2.0)

    def with_weights(self, weight_bytes: int, source: str) -> "ModelShape":
        from dataclasses import replace

        return replace(self, weight_bytes=weight_bytes, source=f"{self.source}, weights {source}")

    def describe_kv(self, kv_dtype: str | None) -> str:
        """What a token costs, in words: per layer kind, for the messages and views."""
        if self.latent_values:
            indexer = f" + a {self.indexer_values}-value indexer key ({self.indexer_bytes_per_token(kv_dtype):,.0f} B)" \
                if self.indexer_values else ""
            return (f"{self.attention_layers} latent-attention layers x {self.latent_values} values per token "
                    f"({self.kv_bytes_per_token(kv_dtype) - self.indexer_bytes_per_token(kv_dtype):,.0f} B, {kv_dtype})"
                    f"{indexer}, kept whole on every GPU")
        return (f"{self.attention_layers} attention layers x {self.kv_heads} KV heads x {self.head_dim} x K and V "
                f"({self.kv_bytes_per_token(kv_dtype):,.0f} B per token, {kv_dtype}), split across GPUs")

    @classmethod
    def from_gguf(cls, path: str | Path) -> "ModelShape":
        """The shape a llama.cpp engine will load: metadata plus the exact bytes of every tensor."""
        fields, tensor_bytes = read_gguf_header(path)
        arch = fields.get("general.architecture")
        heads = int(fields[f"{arch}.attention.head_count"])
        kv_heads = fields.get(f"{arch}.attention.head_count_kv")
        embedding = int(fields[f"{arch}.embedding_length"])
        head_dim = fields.get(f"{arch}.attention.key_length") or embedding // heads
        layers = int(fields[f"{arch}.block_count"])
        context = fields.get(f"{arch}.context_length")
        return cls(name=str(fields.get("general.name") or Path(path).stem), layers=layers, attention_layers=layers,
                   kv_heads=int(kv_heads if kv_heads is not None else heads), head_dim=int(head_dim),
                   weight_bytes=tensor_bytes, context_length=int(context) if context else None, source=str(path))

    @classmethod
    def from_config(cls, config: dict, name: str = "model", weight_dtype: str | None = None,
                    checkpoint_bytes: int | None = None) -> "ModelShape":
        """A Hugging Face `config.json`. Weight bytes are the checkpoint's own size where it is known (the
        `total_size` of model.safetensors.index.json), else the parameter count times the dtype's size (an
        estimate: embeddings tied or not, biases, quantization); hybrid models list `layer_types`, and their
        linear-attention layers hold a fixed state per request instead of a KV cache."""
        text = config.get("text_config") or config
        layers = int(text["num_hidden_layers"])
        heads = int(text["num_attention_heads"])
        kv_heads = int(text.get("num_key_value_heads") or heads)
        hidden = int(text["hidden_size"])
        head_dim = int(text.get("head_dim") or hidden // heads)
        kinds = text.get("layer_types") or ["full_attention"] * layers
        attention = sum(1 for k in kinds if not any(word in str(k) for word in RECURRENT_LAYER_WORDS))
        state = 0
        if attention < layers:
            linear = layers - attention
            value_heads = int(text.get("linear_num_value_heads") or text.get("linear_num_heads") or heads)
            key_dim = int(text.get("linear_key_head_dim") or head_dim)
            value_dim = int(text.get("linear_value_head_dim") or head_dim)
            state = linear * value_heads * key_dim * value_dim * 4  # fp32 recurrent state per request
        latent = int(text.get("kv_lora_rank") or 0)
        latent += int(text.get("qk_rope_head_dim") or 0) if latent else 0
        vocab = int(text.get("vocab_size") or 0)
        ff = int(text.get("intermediate_size") or 4 * hidden)
        experts = int(text.get("num_experts") or text.get("num_local_experts") or 1)
        expert_ff = int(text.get("moe_intermediate_size") or ff)
        per_block = hidden * head_dim * (heads * 2 + kv_heads * 2) + 3 * hidden * expert_ff * experts
        params = per_block * layers + vocab * hidden * (1 if text.get("tie_word_embeddings") else 2)
        dtype = weight_dtype or str(text.get("torch_dtype") or config.get("torch_dtype") or "bfloat16")
        weights = checkpoint_bytes if checkpoint_bytes is not None else int(params * WEIGHT_DTYPE_BYTES.get(dtype, 2.0))
        return cls(name=name, layers=layers, attention_layers=attention, kv_heads=kv_heads, head_dim=head_dim,
                   weight_bytes=weights, context_length=text.get("max_position_embeddings"),
                   recurrent_state_bytes=state, latent_values=latent,
                   indexer_values=int(text.get("index_head_dim") or 0) if latent else 0,
                   source="config.json" + (" and the checkpoint's size" if checkpoint_bytes is not None else ""))

    @classmethod
    def from_file(cls, path: str | Path) -> "ModelShape":
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        if path.suffix == ".json":
            index = path.parent / "model.safetensors.index.json"
            size = json.loads(index.read_text()).get("metadata", {}).get("total_size") if index.exists() else None
            return cls.from_config(json.loads(path.read_text()), name=path.parent.name,
                                   checkpoint_bytes=int(size) if size else None)
        return cls.from_gguf(path)


@dataclass(frozen=True)
class Fit:
    """What fits in one replica of `tensor_parallel` GPUs with `gpu_gib` each."""

    tensor_parallel: int
    replicas: int
    token_pool: int
    requests_at_context: int
    context_length: int
    #: what one request at the context length costs each GPU of the replica (KV share plus state share)
    request_bytes_per_gpu: float = 0.0

    @property
    def total_requests(self) -> int:
        return self.replicas * self.requests_at_context


def fit(shape: ModelShape, *, gpu_gib: float, tensor_parallel: int, context_length: int, kv_dtype: str | None = None,
        gpus: int = 8, memory_fraction: float = 0.9, overhead_gib: float = 1.0) -> Fit:
    """`memory_fraction` of each GPU is the engine's to use (SGLang's mem_fraction_static, vLLM's
    gpu_memory_utilization); `overhead_gib` per GPU is activations and graphs, which the arithmetic cannot know."""
    usable = (gpu_gib * memory_fraction - overhead_gib) * GIB * tensor_parallel - shape.weight_bytes
    per_token = shape.kv_bytes_per_token(kv_dtype, tensor_parallel)
    pool = max(0, int(usable // per_token)) if usable > 0 else 0
    per_request = context_length * per_token + shape.recurrent_state_bytes
    requests = max(0, int(usable // per_request)) if usable > 0 else 0
    return Fit(tensor_parallel, gpus // tensor_parallel, pool, requests, context_length, per_request / tensor_parallel)


def replica_table(shape: ModelShape, *, gpu_gib: float, context_length: int, kv_dtype: str | None = None,
                  gpus: int = 8, **options) -> list[Fit]:
    """Replicas versus wider TP on one host: each power-of-two width up to `gpus` that holds the weights."""
    widths = [w for w in (1, 2, 4, 8, 16) if w <= gpus]
    return [f for f in (fit(shape, gpu_gib=gpu_gib, tensor_parallel=w, context_length=context_length,
                            kv_dtype=kv_dtype, gpus=gpus, **options) for w in widths) if f.token_pool > 0]


@dataclass(frozen=True)
class KvCheck:
    cells: int
    logged_bytes: float
    arithmetic_bytes: float

    @property
    def ratio(self) -> float:
        return self.arithmetic_bytes / self.logged_bytes if self.logged_bytes else float("nan")

    @property
    def agrees(self) -> bool:
        return abs(self.ratio - 1) <= 0.01

    def row(self) -> dict:
        return {"kv_cells": self.cells, "kv_logged_mib": self.logged_bytes / 2**20,
                "kv_arithmetic_mib": self.arithmetic_bytes / 2**20, "kv_ratio": self.ratio, "kv_agrees": self.agrees}


def check_against_engine(shape: ModelShape, cells: int, logged_bytes: float, kv_dtype: str | None = None) -> KvCheck:
    return KvCheck(cells, logged_bytes, cells * shape.kv_bytes_per_token(kv_dtype))


def logged_memory_check(adapter: "EngineAdapter", model_file: str | None, engine_log: Path) -> dict[str, Any] | None:
    """The model's KV arithmetic against the KV cache the engine logged when it loaded (llama.cpp's log says);
    None when the engine logs none or the model is not a local GGUF."""
    import os

    head = engine_log.read_bytes()[:2_000_000].decode("utf-8", "replace") if engine_log.is_file() else ""
    logged = adapter.logged_kv_cache(head)  # the allocation is logged at load, near the top
    if logged is None or not model_file or not os.path.isfile(model_file):
        return None
    try:
        shape = ModelShape.from_gguf(model_file)
    except Exception as error:  # a file the gguf reader cannot parse is a missing check, not a failed run
        return {"status": "not checked", "why": f"{type(error).__name__}: {error}"}
    check = check_against_engine(shape, logged.cells, logged.bytes, logged.k_type)
    return {"status": "agrees" if check.agrees else "disagrees", **check.row(), "kv_dtype": logged.k_type,
            "kv_bytes_per_token": shape.kv_bytes_per_token(logged.k_type), "weight_bytes": shape.weight_bytes,
            "layers": shape.layers, "kv_heads": shape.kv_heads, "head_dim": shape.head_dim}


_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf_header(path: str | Path) -> tuple[dict[str, Any], int]:
    """The scalar metadata of a GGUF file and the bytes of all its tensors, from its header alone.

    gguf's own reader decodes every array (150,000 vocabulary strings) into numpy views, which takes
    seconds per run; this walks over the arrays and reads only what the arithmetic needs."""
    import struct

    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    with open(path, "rb") as f:
        data = f.read(64 * 2**20)  # metadata and tensor infos of even large vocabularies fit
    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    offset = 8  # magic and version

    def take(fmt: str):
        nonlocal offset
        value = struct.unpack_from(fmt, data, offset)[0]
        offset += struct.calcsize(fmt)
        return value

    def string() -> str:
        nonlocal offset
        length = take("<Q")
        text = data[offset:offset + length].decode("utf-8", "replace")
        offset += length
        return text

    def skip_array() -> None:
        nonlocal offset
        kind, count = take("<I"), take("<Q")
        if kind == 8:
            for _ in range(count):
                offset += 8 + struct.unpack_from("<Q", data, offset)[0]
        elif kind in _SCALARS:
            offset += count * struct.calcsize(_SCALARS[kind])
        else:
            for _ in range(count):
                skip_array()

    tensors, count = take("<Q"), take("<Q")
    fields: dict[str, Any] = {}
    for _ in range(count):
        key, kind = string(), take("<I")
        if kind == 8:
            fields[key] = string()
        elif kind == 9:
            skip_array()
        else:
            fields[key] = take(_SCALARS[kind])
    total = 0
    for _ in range(tensors):
        string()
        dims = [take("<Q") for _ in range(take("<I"))]
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(take("<I"))]
        take("<Q")
        total += math.prod(dims) // block * size
    return fields, total
