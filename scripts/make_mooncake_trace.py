"""The small Mooncake-style trace servebook ships (lib/servebook/data/traces/mooncake-small.jsonl): chat
conversations that grow turn by turn, two in three opening with one of two shared system prompts, interleaved in time.

Mooncake's format: one JSON object a line, `timestamp` (ms), `input_length`, `output_length` and `hash_ids`, one id
per 512-token block of the prompt. A full block keeps its id while the conversation grows; the last, partial block
of a turn is new in the next turn (its tokens went on), so it gets a fresh id, as a hash of the block's content does.
Prompts stay under 1,700 tokens (about 35,000 in all, so that a 2-core host replays it in seconds), and the tiny llama.cpp
model's 2,048-token slots hold them with their outputs.

    .venv/bin/python scripts/make_mooncake_trace.py > lib/servebook/data/traces/mooncake-small.jsonl
"""

from __future__ import annotations

import json
import random
import sys

BLOCK = 512
SYSTEM_PROMPTS: tuple[list[int], ...] = ([0], [1], [])  # two shared one-block system prompts, and none
CONVERSATIONS, TURNS = 10, 4
START_GAP_MS, TURN_GAP_MS = 1200, 3000


def conversation(rng: random.Random, system: list[int], start_ms: int, next_id: int) -> tuple[list[dict], int]:
    """One conversation's turns, and the next free block id."""
    full: list[int] = []  # ids of its own full blocks, by position after the system prompt
    own = rng.randint(80, 250)
    turns = []
    for turn in range(TURNS):
        length = len(system) * BLOCK + own
        while len(full) < own // BLOCK:
            full.append(next_id)
            next_id += 1
        hashes = system + full
        if own % BLOCK:
            hashes = hashes + [next_id]  # the partial last block: new every turn
            next_id += 1
        jitter = rng.randint(0, 400)
        turns.append({"timestamp": start_ms + turn * TURN_GAP_MS + jitter, "input_length": length,
                      "output_length": rng.randint(4, 12), "hash_ids": hashes})
        own += rng.randint(180, 320)
    return turns, next_id


def main() -> None:
    rng = random.Random(33)
    rows, next_id = [], 100
    for c in range(CONVERSATIONS):
        turns, next_id = conversation(rng, SYSTEM_PROMPTS[c % len(SYSTEM_PROMPTS)], c * START_GAP_MS, next_id)
        rows.extend(turns)
    for row in sorted(rows, key=lambda r: r["timestamp"]):
        sys.stdout.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
