"""Balanced placement: which lane (a GPU group of one host, or a Ray node) each run of a parallel sweep goes to.

Lanes differ in speed: the same study on two H200 hosts measured 1,460 and 951 tok/s at 16 requests. Placed
wherever a GPU frees up first, a candidate can land mostly on the slow lane, and its verdict then compares lanes,
not configurations. So lanes are blocks of the design: run r of the study's entry i goes to lane (i + r) mod L,
a cyclic design in which every lane holds a mix of candidates, each candidate moves from lane to lane, and with
L or more repeats every candidate, the baseline included, has a run on every lane. The run records its lane
(`Environment.lane`), the judge's machine key is built from it, and the study model fits it as a block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..config.study import StudyEntry


@dataclass(frozen=True)
class Lane:
    """Where a run goes. `gpus`: a local GPU group, used one run at a time; `node`: a Ray node, many at once."""

    label: str
    gpus: tuple[int, ...] | None = None
    node: str | None = None


def gpu_lanes(gpus: Sequence[int], width: int, count: int) -> list[Lane]:
    """`count` disjoint groups of `width` neighbouring GPUs (neighbours usually share a switch)."""
    ordered = sorted(gpus)
    groups = [tuple(ordered[i * width:(i + 1) * width]) for i in range(min(count, len(ordered) // width))]
    return [Lane("gpus " + ",".join(map(str, group)), gpus=group) for group in groups]


def lane_for(entry_index: int, repeat: int, lanes: Sequence[Lane]) -> Lane:
    """The cyclic design: entry i's run r on lane (i + r) mod L."""
    return lanes[(entry_index + repeat) % len(lanes)]


def place(order: Sequence[tuple[int, StudyEntry]], entries: Sequence[StudyEntry],
          lanes: Sequence[Lane]) -> list[tuple[int, StudyEntry, Lane]]:
    """Each (repeat, entry) of `order` with its lane."""
    index = {entry.name: i for i, entry in enumerate(entries)}
    return [(repeat, entry, lane_for(index[entry.name], repeat, lanes)) for repeat, entry in order]
