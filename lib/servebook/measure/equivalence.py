"""Output equivalence: greedy decoding with a fixed seed must give the same tokens whether a request runs
alone or in a batch, and whether a drafter proposes tokens or not (a drafter only changes speed).

Scored as the share of identical tokens, position by position, and the first position that differs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from ..config.plan import EquivalencePlan

SEED = 1234


async def greedy_outputs(openai: AsyncOpenAI, model: str, plan: EquivalencePlan, filler: list[int],
                         extras: dict[str, Any], tokenize: Callable[[str], Awaitable[list[int]]], *,
                         into: list[dict]) -> None:
    """Each prompt alone, then all at once, greedy with `extras` (the fixed seed among them), each output added to
    `into` as it comes (the log, which survives an engine's death); the prompts are the same in every run, cut from
    `filler`, so runs can be compared with each other (a drafter against the baseline)."""
    span = max(1, len(filler) - plan.prompt_tokens)
    prompts = [filler[(i * 331) % span:][:plan.prompt_tokens] for i in range(plan.prompts)]

    async def one(i: int, prompt: list[int], mode: str) -> None:
        response = await openai.completions.create(model=model, prompt=prompt, max_tokens=plan.output_tokens,
                                                   temperature=0, extra_body=extras)
        text = response.choices[0].text or ""
        into.append({"prompt": i, "mode": mode, "text": text, "tokens": await tokenize(text),
                     "completion_tokens": response.usage.completion_tokens if response.usage else None})

    for i, prompt in enumerate(prompts):
        await one(i, prompt, "solo")
    await asyncio.gather(*(one(i, prompt, "concurrent") for i, prompt in enumerate(prompts)))


def identical_share(a: list[int], b: list[int]) -> tuple[float, int | None]:
    """Share of positions (over the longer output) holding the same token, and the first that differs."""
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0, None
    same = sum(1 for x, y in zip(a, b, strict=False) if x == y)
    first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    return same / longest, first


def compare_outputs(reference: Iterable[dict], other: Iterable[dict], reference_mode: str = "solo",
                    other_mode: str = "solo") -> dict | None:
    """Per prompt, `other`'s tokens against `reference`'s: the overall identical share and each divergence."""
    ref_rows = {row["prompt"]: row for row in reference if row["mode"] == reference_mode}
    oth_rows = {row["prompt"]: row for row in other if row["mode"] == other_mode}
    ref = {prompt: list(row["tokens"]) for prompt, row in ref_rows.items()}
    oth = {prompt: list(row["tokens"]) for prompt, row in oth_rows.items()}
    common = sorted(set(ref) & set(oth))
    if not common:
        return None
    same = total = 0
    diverged = []
    for prompt in common:
        share, first = identical_share(ref[prompt], oth[prompt])
        longest = max(len(ref[prompt]), len(oth[prompt]))
        same += round(share * longest)
        total += longest
        if first is not None:
            diverged.append({"prompt": prompt, "first_difference": first,
                             "reference_text": _flat(ref_rows[prompt].get("text")),
                             "other_text": _flat(oth_rows[prompt].get("text"))})
    return {"prompts": len(common), "identical_share": same / total if total else 1.0, "diverged": diverged}


def _flat(text: object, limit: int = 120) -> str | None:
    """An output on one line, its opening only: enough for a reader to see where two outputs part."""
    if not isinstance(text, str):
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "\u2026"


def describe(result: dict | None, against: str) -> str:
    if result is None:
        return f"output equivalence against {against}: not measured"
    if not result["diverged"]:
        return f"output identical to {against} on {result['prompts']} greedy prompts"
    first = result["diverged"][0]
    texts = ""
    if first.get("reference_text") is not None and first.get("other_text") is not None:
        texts = f': {against} wrote "{first["reference_text"]}", this one "{first["other_text"]}"'
    return (f"output diverges from {against} in {len(result['diverged'])} of {result['prompts']} greedy prompts "
            f"({result['identical_share']:.0%} of tokens identical; prompt {first['prompt']} first differs at token "
            f"{first['first_difference']}{texts})")
