"""A random-weight checkpoint shaped as a reasoning model, so an engine's reasoning parser can be exercised with no
download: the same weights and vocabulary size as a checkpoint of hf_checkpoints, two of its tokens made `<think>`
and `</think>`, and a chat template that opens the thinking block in the prompt (as DeepSeek-R1's and Qwen3's
templates do) unless the request says `chat_template_kwargs: {enable_thinking: false}`, which closes it at once.

vLLM's and SGLang's reasoning parsers look the two markers up in the tokenizer and refuse to start without them;
the random checkpoints of hf_checkpoints have a plain ChatML template and neither marker. With the block opened by
the prompt, a parser that expects that (vLLM's and SGLang's `deepseek_r1`) classifies every generated token as
reasoning until `</think>`, which a random model draws by chance only: its chat streams are reasoning deltas.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from .hf_checkpoints import CHAT_TEMPLATE, RECORD

THINK_START, THINK_END = "<think>", "</think>"
THINKING_SUFFIX = "-thinking"
_GENERATION_PROMPT = "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
#: the ChatML template of hf_checkpoints, its generation prompt opening the thinking block (or closing it at once)
THINKING_TEMPLATE = CHAT_TEMPLATE.replace(_GENERATION_PROMPT, (
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and not enable_thinking %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}{{- '<think>\\n' }}{%- endif %}{%- endif %}"))


def thinking_path(source: Path) -> Path:
    return source.with_name(source.name + THINKING_SUFFIX)


def write_thinking_checkpoint(source: Path, path: Path | None = None) -> Path:
    """`source` (a checkpoint of hf_checkpoints) as a reasoning model at `path` (beside it by default): the weights
    linked, not copied; the tokenizer's last two tokens renamed to the thinking markers; the thinking template."""
    if THINK_START not in THINKING_TEMPLATE:
        raise RuntimeError("hf_checkpoints' chat template changed: its generation prompt is not where it was")
    path = path or thinking_path(source)
    staging = path.with_name(f".{path.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for item in source.iterdir():
        if item.name in ("tokenizer.json", "tokenizer_config.json", RECORD):
            continue
        try:
            os.link(item, staging / item.name)
        except OSError:
            shutil.copy2(item, staging / item.name)
    tokenizer = json.loads((source / "tokenizer.json").read_text())
    (staging / "tokenizer.json").write_text(json.dumps(with_markers(tokenizer), ensure_ascii=False))
    config = json.loads((source / "tokenizer_config.json").read_text())
    (staging / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": THINKING_TEMPLATE},
                                                              indent=2, ensure_ascii=False) + "\n")
    record = json.loads((source / RECORD).read_text())
    (staging / RECORD).write_text(json.dumps({**record, "thinking": {"markers": [THINK_START, THINK_END]}},
                                             indent=2) + "\n")
    shutil.rmtree(path, ignore_errors=True)
    staging.rename(path)
    return path


def with_markers(tokenizer: dict[str, Any]) -> dict[str, Any]:
    """A byte-level BPE tokenizer's JSON with its two last tokens renamed to the thinking markers (the vocabulary's
    size, which the model's embedding has, is kept): their merges dropped, the markers added tokens, matched whole."""
    model = tokenizer["model"]
    vocab: dict[str, int] = model["vocab"]
    by_id = sorted(vocab, key=vocab.__getitem__)
    last = by_id[-2:]
    renamed = {token: marker for token, marker in zip(last, (THINK_START, THINK_END), strict=True)}
    model["vocab"] = {renamed.get(token, token): i for token, i in vocab.items()}

    def joined(merge: Any) -> str:
        return "".join(merge) if isinstance(merge, list) else merge.replace(" ", "", 1)

    model["merges"] = [m for m in model["merges"] if joined(m) not in renamed]
    added = [t for t in tokenizer.get("added_tokens", []) if t["content"] not in renamed]
    for marker in (THINK_START, THINK_END):
        added.append({"id": model["vocab"][marker], "content": marker, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": False})
    return {**tokenizer, "added_tokens": added, "model": model}
