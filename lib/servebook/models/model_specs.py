"""The shapes of servebook's random-weight models and where they are cached, shared by both writers: the GGUF
one for llama.cpp (random_models) and the Hugging Face one for vLLM and SGLang (hf_checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..engines import MODEL_FORMATS, ModelFormat
from ..util.errors import InputError
from ..util.paths import cache_root

#: values in the seeded noise pool every tensor of a large model is cut from
NOISE_POOL = 1 << 24
#: parameters below which every weight is drawn (the tiny models' recipe) rather than cut from the pool
EVERY_WEIGHT_DRAWN_BELOW = 50_000_000
#: the qwen2 vocabulary the GGUF models carry, and what the Hugging Face presets match so the LM head costs the same
QWEN2_VOCAB = 151936


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a llama-architecture model: what the engine's speed depends on."""

    name: str
    seed: int
    embedding_length: int
    block_count: int
    feed_forward_length: int
    head_count: int
    head_count_kv: int
    context_length: int = 32768
    dtype: str = "f16"
    recipe: int = 1  # bumped when the recipe changes, so old files are not mistaken for new ones
    family: str = "random"  # "tiny" for the test models, whose file names predate the shape in the name
    #: the Hugging Face checkpoint's vocabulary; a GGUF always carries the qwen2 one, of this default size
    vocab_size: int = QWEN2_VOCAB

    @property
    def filename(self) -> str:
        if self.family == "tiny":
            return f"tiny-{self.name}-r{self.recipe}.gguf"
        shape = f"d{self.embedding_length}-l{self.block_count}-f{self.feed_forward_length}-h{self.head_count}" \
                f"-kv{self.head_count_kv}-{self.dtype}"
        return f"random-{self.name}-{shape}-r{self.recipe}.gguf"

    @property
    def head_dim(self) -> int:
        return self.embedding_length // self.head_count

    def parameters(self, n_vocab: int | None = None) -> int:
        """Weights with the embedding tied to the LM head (neither format stores an output matrix)."""
        d, ff = self.embedding_length, self.feed_forward_length
        d_kv = self.head_dim * self.head_count_kv
        per_block = 2 * d * d + 2 * d * d_kv + 3 * d * ff + 2 * d
        return (n_vocab or self.vocab_size) * d + self.block_count * per_block + d

    def kv_bytes_per_token(self, kv_dtype_bytes: int = 2) -> int:
        """KV cache bytes per token: layers x KV heads x head dim x 2 (K and V) x element size."""
        return self.block_count * self.head_count_kv * self.head_dim * 2 * kv_dtype_bytes


RANDOM_MODELS: dict[str, ModelSpec] = {
    # shapes of public models of these sizes (Qwen2.5-0.5B, Llama-3.2-1B, Llama-3.2-3B, Llama-3.1-8B)
    "0.5b": ModelSpec("0.5b", 11, 896, 24, 4864, 14, 2, context_length=131072),
    "1b": ModelSpec("1b", 12, 2048, 16, 8192, 32, 8, context_length=131072),
    "3b": ModelSpec("3b", 13, 3072, 28, 8192, 24, 8, context_length=131072),
    "8b": ModelSpec("8b", 14, 4096, 32, 14336, 32, 8, context_length=131072),
    "draft": ModelSpec("draft", 15, 512, 2, 1536, 8, 4, context_length=131072),
}

#: The tiny models tests and the demo serve (see tiny_models); here so that references resolve without a cycle.
TINY_MODELS: dict[str, ModelSpec] = {
    "target": ModelSpec("target", seed=1, embedding_length=256, block_count=4, feed_forward_length=768,
                        head_count=4, head_count_kv=2, family="tiny"),
    "draft": ModelSpec("draft", seed=2, embedding_length=128, block_count=1, feed_forward_length=256,
                       head_count=2, head_count_kv=2, family="tiny"),
}

#: The tiny models as Hugging Face checkpoints: a small vocabulary (shared, so the draft can draft for the target)
#: keeps the embedding from outweighing the rest of a tiny model.
TINY_HF_MODELS: dict[str, ModelSpec] = {name: replace(spec, vocab_size=4096) for name, spec in TINY_MODELS.items()}


def models_dir() -> Path:
    return cache_root() / "models"


def model_formats(value: str) -> tuple[ModelFormat, ...]:
    """`--format`: gguf, hf or both."""
    if value == "both":
        return MODEL_FORMATS
    for fmt in MODEL_FORMATS:
        if value == fmt:
            return (fmt,)
    raise InputError(f"--format {value!r}: choose gguf, hf or both")


def disk_bytes(path: Path) -> int:
    """A model's size on disk: its file's, or the sum of the files of its checkpoint directory."""
    return path.stat().st_size if path.is_file() else sum(f.stat().st_size for f in path.iterdir() if f.is_file())
