"""Prompt corpora shipped with the package (lib/servebook/data/corpora), and prompts of exact token length built
from them."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..util.resources import shipped

SEPARATOR = "\n===\n"


@lru_cache(maxsize=None)
def corpus(category: str, data_dir: Path | None = None) -> tuple[str, ...]:
    """The passages of one category (prose, code, ...), from the shipped corpora or those under `data_dir`."""
    path = (data_dir or shipped()) / "corpora" / f"{category}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"no prompt corpus for category {category!r} at {path}")
    passages = tuple(p.strip() for p in path.read_text().split(SEPARATOR) if p.strip())
    if not passages:
        raise ValueError(f"{path} holds no passages")
    return passages


def decode_prompt(category: str, index: int, tag: str) -> list[dict]:
    """Chat messages for request `index`; the leading tag makes every prompt's prefix unique,
    so a decode cell never measures a prompt-cache hit left by an earlier cell."""
    passages = corpus(category)
    return [{"role": "user", "content": f"[{tag}] {passages[index % len(passages)]}"}]


def completion_prompt(category: str, index: int, tag: str) -> str:
    """The same passage as `decode_prompt`, as raw text for a base model to continue (plan.decode.prompt_style)."""
    passages = corpus(category)
    return f"[{tag}] {passages[index % len(passages)]}"


def filler_text() -> str:
    """Long running text for prefill prompts: every passage of every category, in order."""
    return "\n\n".join(corpus("prose") + corpus("code"))


def exact_length_prompt(filler_tokens: list[int], prefix_tokens: list[int], length: int) -> list[int]:
    """A token-id prompt of exactly `length` tokens: unique prefix, then filler (repeated as needed)."""
    if len(prefix_tokens) >= length:
        raise ValueError(f"the unique prefix alone is {len(prefix_tokens)} tokens, longer than {length}")
    if not filler_tokens:
        raise ValueError("filler text tokenized to nothing")
    body_len = length - len(prefix_tokens)
    repeats = body_len // len(filler_tokens) + 1
    return list(prefix_tokens) + (list(filler_tokens) * repeats)[:body_len]


def structured_format(output_tokens: int) -> dict:
    """A json_schema response format that asks for enough notes to fill about `output_tokens` tokens."""
    schema = {"type": "object", "required": ["notes"], "additionalProperties": False,
              "properties": {"notes": {"type": "array", "items": {"type": "string", "minLength": 8},
                                       "minItems": max(1, output_tokens // 12)}}}
    return {"type": "json_schema", "json_schema": {"name": "notes", "schema": schema}}


def structured_prompt(index: int, tag: str) -> list[dict]:
    """Chat messages asking for JSON notes on a passage (grammar-constrained decoding under load)."""
    passages = corpus("prose")
    return [{"role": "user", "content": f"[{tag}] Summarise as JSON notes, one string per sentence:\n"
                                        f"{passages[index % len(passages)]}"}]
