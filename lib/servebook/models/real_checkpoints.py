"""A real model's weights for vLLM and SGLang: a Hugging Face checkpoint written from the same GGUF llama.cpp serves
(models.real_models), so every engine answers the drafter question with the same weights.

transformers reads the GGUF (its tokenizer converted from the file's vocabulary, its Q4_K and Q6_K tensors
dequantized); the checkpoint is saved in bfloat16, the dtype Gemma 3 is trained and served in (float16 overflows
its activations). The values are the GGUF's dequantized weights rounded to bfloat16, so greedy output follows
llama.cpp's until two tokens' logits lie closer than that rounding and the two engines' different arithmetic (see
tests/integration/test_real_model.py for how far they agree). The pretrained model has no chat template of its own;
the checkpoint carries Gemma's turn format, which the model was not tuned for: studies of it send raw text
(plan.decode.prompt_style: completion).

The tokenizer is checked before anything is written: a probe text must give the ids the GGUF's own tokenizer gives
it (RealModel.tokenizer_probe). transformers 5.17 (the lent GPU image's) converts Gemma 3's without its BOS and in
word fragments, and vLLM then answers "Ye 1 1 1 ..." to every prompt; where the conversion is wrong, a tokenizer
written and checked on another machine (`write_real_tokenizer`, carried by tools/gpu-host/split_model.sh) is used instead.

Needs the `hf` extra (transformers, torch, accelerate); written once into servebook's cache.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..util.errors import InputError
from ..util.progress import Reporter
from .real_models import RealModel, ensure_real_model, real_model, real_model_path

__all__ = ["GEMMA_TURNS", "ensure_real_hf_checkpoint", "real_hf_checkpoint_path", "real_tokenizer_path",
           "write_real_tokenizer"]

#: bumped when the way the checkpoint is written changes, so an older one is written again
RECIPE = 3
MARKER = ".servebook-real.json"
#: Gemma's turn format (the instruction-tuned models'), for engines whose chat endpoint needs a template
GEMMA_TURNS = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else 'user' %}"
    "{{ '<start_of_turn>' + role + '\n' + (message['content'] | trim) + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}")


def real_hf_checkpoint_path(reference: str) -> Path:
    model = real_model(reference)
    return real_model_path(model).parent / f"{model.name}-hf"


def real_tokenizer_path(reference: str) -> Path:
    """Where a tokenizer carried from another machine is looked for (a folder transformers saved)."""
    model = real_model(reference)
    return real_model_path(model).parent / f"{model.name}-tokenizer"


def _mismatch(model: RealModel, tokenizer: Any) -> str | None:
    """None when `tokenizer` gives the probe text the GGUF's own ids, else what it gave."""
    text, ids = model.tokenizer_probe
    got = list(tokenizer(text)["input_ids"])
    if not ids or got == list(ids):
        return None
    return f"{got[:8]}... where the GGUF's tokenizer gives {list(ids[:8])}..."


def _checked_tokenizer(reference: str, gguf: Path) -> Any:
    """The GGUF's tokenizer as transformers converts it, or the carried one where that conversion is wrong."""
    import transformers
    from transformers import AutoTokenizer

    model = real_model(reference)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    wrong = _mismatch(model, tokenizer)
    if wrong is None:
        return tokenizer
    carried = real_tokenizer_path(reference)
    if carried.is_dir():
        tokenizer = AutoTokenizer.from_pretrained(carried)
        if _mismatch(model, tokenizer) is None:
            return tokenizer
    raise InputError(
        f"{reference}: transformers {transformers.__version__} converts the tokenizer of {gguf.name} wrongly (the "
        f"probe text gives {wrong}), and no right one was carried to {carried}; write one where transformers "
        "converts it right (5.25 does) with tools/gpu-host/split_model.sh, which carries it beside the model's parts")


def write_real_tokenizer(reference: str, out: Path) -> Path:
    """The model's tokenizer, converted from its GGUF and checked, saved into `out`/NAME-tokenizer: to carry to a
    host whose transformers converts it wrongly."""
    folder = out / real_tokenizer_path(reference).name
    tokenizer = _checked_tokenizer(reference, ensure_real_model(reference))
    tokenizer.save_pretrained(folder)
    return folder


def _written(folder: Path, sha256: str) -> bool:
    marker = folder / MARKER
    if not marker.is_file():
        return False
    found = json.loads(marker.read_text())
    return found.get("gguf_sha256") == sha256 and found.get("recipe") == RECIPE


def _readable_by_older_readers(config_path: Path) -> None:
    """The RoPE bases also under the keys transformers 4 reads (`rope_theta`, `rope_local_base_freq`): an engine
    pinned to it (vLLM 0.26.0 on the lent GPU image) would otherwise fall back to a default base, silently."""
    config = json.loads(config_path.read_text())
    bases = config.get("rope_parameters") or {}
    full, local = bases.get("full_attention") or {}, bases.get("sliding_attention") or {}
    if "rope_theta" in full:
        config.setdefault("rope_theta", full["rope_theta"])
    if "rope_theta" in local:
        config.setdefault("rope_local_base_freq", local["rope_theta"])
    config.setdefault("rope_scaling", None)
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def ensure_real_hf_checkpoint(reference: str, reporter: Reporter | None = None) -> Path:
    """The checkpoint directory of a `real:` model, written from its GGUF the first time (into a temporary folder
    renamed into place, so a half-written one never takes the name)."""
    model = real_model(reference)
    folder = real_hf_checkpoint_path(reference)
    if _written(folder, model.sha256):
        return folder
    gguf = ensure_real_model(reference, reporter)
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise InputError(f"{reference} as a Hugging Face checkpoint needs transformers and torch: "
                         "pip install 'servebook[hf]'") from None
    if reporter is not None:
        reporter.log(f"{reference}: writing a Hugging Face checkpoint from {gguf.name} (dequantized, bfloat16)")
    tokenizer = _checked_tokenizer(reference, gguf)
    try:
        network = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except ValueError as error:  # transformers asks for accelerate to read a GGUF
        raise InputError(f"{reference}: transformers could not read {gguf.name}: {error}") from None
    # The weights are plain tensors once read: nothing of the GGUF's quantization stays to serialize.
    network.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(network.config, "quantization_config"):
        del network.config.quantization_config
    network.config.architectures = [type(network).__name__]
    network = network.to(torch.bfloat16)  # type: ignore[arg-type]
    network.config.torch_dtype = torch.bfloat16
    tokenizer.chat_template = GEMMA_TURNS
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        network.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        wrong = _mismatch(model, AutoTokenizer.from_pretrained(staging))  # what the engines will read
        if wrong is not None:
            raise InputError(f"{reference}: the tokenizer saved with the checkpoint gives {wrong}")
        network.generation_config.save_pretrained(staging)
        _readable_by_older_readers(staging / "config.json")
        for licence in gguf.parent.glob(f"{gguf.stem}.LICENCE*"):
            shutil.copyfile(licence, staging / licence.name)
        (staging / MARKER).write_text(json.dumps({"reference": reference, "gguf_sha256": model.sha256,
                                                  "recipe": RECIPE, "dtype": "bfloat16"}, indent=1) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        staging.chmod(0o755)  # mkdtemp's 0700 would keep an engine run by another user out
        os.replace(staging, folder)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return folder
