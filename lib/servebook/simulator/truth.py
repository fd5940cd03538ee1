"""What the simulator would do for a candidate, without launching it: the candidate's engine command line, read
by the simulator's own flag parser into its timing model. Searches and verdicts are scored against this truth."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .config import TimingModel, parse_engine_argv

if TYPE_CHECKING:
    from ..config.candidate import Candidate


def timing_for(candidate: "Candidate") -> TimingModel:
    from ..engines.registry import get_engine

    argv = get_engine(candidate.engine).argv(candidate, port=1, model_path=candidate.model.path or "model",
                                             draft_path=candidate.knobs.drafter.model)
    return parse_engine_argv(candidate.engine, argv, set()).timing


def open_loop_latencies(timing: TimingModel, arrivals: list[tuple[float, int, int]],
                        speed: float | None = None) -> list[tuple[float, float]]:
    """(TTFT, time per output token) of each arrival (due time, prompt tokens, output tokens), in arrival order, as
    the simulated engine would serve them with no client in the way: the engine's own scheduling (slots taken first
    come first served, a prefill of the whole prompt, a step per token whose length depends on the sequences running
    when it starts) replayed in virtual time. Prompts are taken as uncached (servebook's load prompts have unique
    prefixes) and drafters as absent, so this is the capacity truth for the simulator without a drafter."""
    import heapq

    speed = timing.slowdown if speed is None else speed
    prefill = [(p / timing.prefill_tok_s + math.ceil(p / timing.chunk) * timing.chunk_overhead_s) * speed
               for _, p, _ in arrivals]
    first: list[float] = [0.0] * len(arrivals)
    last: list[float] = [0.0] * len(arrivals)
    produced = [0] * len(arrivals)
    events: list[tuple[float, int, int]] = [(due, 0, i) for i, (due, _, _) in enumerate(arrivals)]  # 0: arrival
    heapq.heapify(events)
    waiting: list[int] = []
    running = 0

    def start(i: int, now: float) -> None:
        nonlocal running
        running += 1
        heapq.heappush(events, (now + prefill[i], 1, i))  # 1: a token

    while events:
        now, kind, i = heapq.heappop(events)
        if kind == 0:
            if running < timing.slots and not waiting:
                start(i, now)
            else:
                waiting.append(i)
            continue
        produced[i] += 1
        if produced[i] == 1:
            first[i] = now
        if produced[i] < max(arrivals[i][2], 1):
            heapq.heappush(events, (now + timing.step_seconds(running, speed), 1, i))
            continue
        last[i] = now
        running -= 1
        if waiting:
            start(waiting.pop(0), now)
    return [(first[i] - due, (last[i] - first[i]) / (out - 1) if out > 1 else 0.0)
            for i, (due, _, out) in enumerate(arrivals)]
