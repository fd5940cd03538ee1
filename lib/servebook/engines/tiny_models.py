"""Deterministic random-weight GGUF models that a real llama-server loads in a second.

No weights are downloaded: the tokenizer is copied from a vocab-only GGUF that ships in the
llama-cpp-python sdist (so prompts tokenize like real text and grammar-constrained JSON works)
and the weights are seeded noise. A target and a smaller draft share the vocabulary, so the
draft can serve as a speculative drafter for the target.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .llamacpp_build import LlamaCppInstall, install_llamacpp, find_llamacpp
from ..util.paths import cache_root
from ..util.progress import Reporter

VOCAB_SOURCE = "ggml-vocab-qwen2.gguf"
CHAT_TEMPLATE = "Qwen-Qwen2.5-7B-Instruct.jinja"
# Bump when the recipe changes so old files are not mistaken for new ones.
RECIPE_VERSION = 1


@dataclass(frozen=True)
class TinyModelSpec:
    name: str
    seed: int
    embedding_length: int
    block_count: int
    feed_forward_length: int
    head_count: int
    head_count_kv: int
    context_length: int = 32768

    @property
    def filename(self) -> str:
        return f"tiny-{self.name}-r{RECIPE_VERSION}.gguf"


TINY_MODELS: dict[str, TinyModelSpec] = {
    "target": TinyModelSpec("target", seed=1, embedding_length=256, block_count=4,
                            feed_forward_length=768, head_count=4, head_count_kv=2),
    "draft": TinyModelSpec("draft", seed=2, embedding_length=128, block_count=1,
                           feed_forward_length=256, head_count=2, head_count_kv=2),
}


def tiny_models_dir() -> Path:
    return cache_root() / "models"


def tiny_model_path(name: str) -> Path:
    if name not in TINY_MODELS:
        raise KeyError(f"unknown tiny model {name!r}; known: {', '.join(TINY_MODELS)}")
    return tiny_models_dir() / TINY_MODELS[name].filename


def ensure_tiny_models(
    install: LlamaCppInstall | None = None, reporter: Reporter | None = None
) -> dict[str, Path]:
    """Write every tiny model that is missing; return name -> path."""
    reporter = reporter or Reporter(quiet=True)
    paths = {}
    for name, spec in TINY_MODELS.items():
        path = tiny_model_path(name)
        if not path.is_file():
            install = install or find_llamacpp() or install_llamacpp(reporter=reporter)
            with reporter.task(f"write tiny {name} model"):
                write_tiny_model(spec, path, install)
        paths[name] = path
    return paths


def write_tiny_model(spec: TinyModelSpec, path: Path, install: LlamaCppInstall) -> Path:
    from gguf import GGUFReader, GGUFValueType, GGUFWriter

    vocab = GGUFReader(install.vocab_dir / VOCAB_SOURCE)
    template = (install.templates_dir / CHAT_TEMPLATE).read_text()
    n_vocab = len(vocab.fields["tokenizer.ggml.tokens"].data)

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    writer = GGUFWriter(tmp_name, "llama")
    writer.add_name(f"servebook tiny {spec.name} (random weights)")
    writer.add_context_length(spec.context_length)
    writer.add_embedding_length(spec.embedding_length)
    writer.add_block_count(spec.block_count)
    writer.add_feed_forward_length(spec.feed_forward_length)
    writer.add_head_count(spec.head_count)
    writer.add_head_count_kv(spec.head_count_kv)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_file_type(1)  # mostly F16
    for key, field in vocab.fields.items():
        if not key.startswith("tokenizer.") or key == "tokenizer.chat_template":
            continue
        value_type = field.types[0]
        sub_type = field.types[1] if value_type == GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), value_type, sub_type)
    writer.add_chat_template(template)

    rng = np.random.default_rng(spec.seed)
    d, ff = spec.embedding_length, spec.feed_forward_length
    d_kv = d // spec.head_count * spec.head_count_kv

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)

    # numpy shapes are ggml's reversed: token_embd is ggml [d, n_vocab].
    writer.add_tensor("token_embd.weight", weight(n_vocab, d))
    writer.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    for i in range(spec.block_count):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(d, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", weight(d, d))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weight(d_kv, d))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weight(d_kv, d))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weight(d, d))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(d, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(ff, d))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(ff, d))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(d, ff))
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    os.replace(tmp_name, path)
    return path
