"""Resident rounds: the runs of one interleaving round all launched at once on one machine, their engines resident
side by side, measuring in turn, one step (warm-up, a cell, a capacity probe, the gates) at a time, cell-major.

Why: on a lent H200 the host's CPUs change speed from minute to minute (neighbours on the physical cores), and a
vLLM serving a 1B model is CPU-bound, so whole launches made minutes apart differ by 20% at 16 requests while
requests within a cell differ by 2%. Runs made one after another put those minutes between the candidates of a
round; measured in turn, the same cell of every candidate of a round lies within the same minute, and the verdict's
round blocks (estimates.model) take out what the host did to all of them.

The seats of a round are separate processes (one notebook kernel each), so they coordinate through a small state
file under an exclusive lock: stdlib only, nothing listens, and a seat whose process died is passed over (its pid
is checked), so no seat ever waits on one that is gone. Every wait is bounded."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

from ..config.parameters import Seat

#: how often a waiting seat looks at the state: a turn handed over costs at most this much idle GPU
POLL_S = 0.05


class TurnTimeout(RuntimeError):
    """A seat waited longer than its bound for a turn (a seat ahead of it hung without dying)."""


class RoundStopped(Exception):
    """The sweep stopped the round (Ctrl-C): the seat stops as an interrupted run does. The sweep also interrupts
    each seat's kernel; this reaches a seat that was not in a cell then, at its next turn or before its launch.
    Not a KeyboardInterrupt: it is raised inside a coroutine, which asyncio would re-raise out of its loop."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - another user's process still counts as alive
        return True
    return True


class _RoundState:
    """The round's state file, read and changed under an exclusive lock: seat -> {pid, state, steps}."""

    def __init__(self, seat: Seat):
        directory = Path(seat.directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._state = directory / f"{seat.round_id}.turns.json"
        self._lock = directory / f"{seat.round_id}.turns.lock"
        self._stop = directory / f"{seat.round_id}.turns.stop"

    def stop(self) -> None:
        self._stop.touch()

    @property
    def stopped(self) -> bool:
        return self._stop.exists()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self._lock, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def read(self) -> dict[str, dict[str, Any]]:
        try:
            return dict(json.loads(self._state.read_text()))
        except (FileNotFoundError, ValueError):
            return {}

    def set(self, seat: int, **fields: Any) -> None:
        with self._locked():
            seats = self.read()
            seats.setdefault(str(seat), {"state": "starting", "steps": 0}).update(fields)
            temporary = self._state.with_suffix(".tmp")
            temporary.write_text(json.dumps(seats, sort_keys=True))
            temporary.replace(self._state)


def release(seat: Seat) -> None:
    """Mark a seat gone from outside its run (the sweep, once the run's notebook returned, however it ended)."""
    _RoundState(seat).set(seat.seat, state="gone")


def stop_round(seat: Seat) -> None:
    """Stop the round `seat` sits in, from outside its runs (the sweep, on Ctrl-C): every seat stops at its next
    wait, and a seat not launched yet does not launch."""
    _RoundState(seat).stop()


class Turns:
    """This run's seat in its round: `arrive` once its engine serves, `step` around each measured step, `finish`
    when its plan is measured (it then waits for the others, so no engine stops while another measures), `leave` in
    any case. Order within a step rotates with the step, from a start that differs by round, so no candidate always
    follows the same one; odd steps go backward, so a sliced cell (an even number of steps, begun on an even one)
    puts every seat at the same mean position and a host that drifts during the cell weighs on all of them alike."""

    def __init__(self, seat: Seat, *, wait_s: float = 1800.0, clock: Callable[[], float] = time.monotonic):
        self.seat = seat
        self.wait_s = wait_s
        self.clock = clock
        self.steps_done = 0
        self._round = _RoundState(seat)
        if self._round.stopped:  # before anything is recorded: the round was stopped before this seat began
            raise RoundStopped(f"round {seat.round_id} was stopped before seat {seat.seat + 1} began")
        #: where this round's rotation starts: every seat derives the same from the round's id
        self._start = int(hashlib.sha256(seat.round_id.encode()).hexdigest(), 16) % seat.seats
        self._round.set(seat.seat, pid=os.getpid(), state="starting", steps=0)

    def _read(self) -> dict[str, dict[str, Any]]:
        return self._round.read()

    def _set(self, **fields: Any) -> None:
        self._round.set(self.seat.seat, **fields)

    def _live(self, seats: dict[str, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """Seats still in the round: not gone, their process alive; a seat not yet written is still starting."""
        out = {}
        for index in range(self.seat.seats):
            entry = seats.get(str(index), {"state": "starting", "steps": 0, "pid": None})
            if entry.get("state") == "gone" or (entry.get("pid") and not _alive(int(entry["pid"]))):
                continue
            out[index] = entry
        return out

    def order(self, step: int) -> list[int]:
        """The seats' order at `step`, a function of the step alone so every seat agrees on it: rotated by one
        each pair of steps from the round's own start, and backward on odd steps (step 2m+1 mirrors step 2m)."""
        n = self.seat.seats
        forward = [(self._start + step // 2 + k) % n for k in range(n)]
        return forward[::-1] if step % 2 else forward

    def my_turn(self, seats: dict[str, dict[str, Any]], step: int) -> bool:
        """Whether this seat may take `step`: every live seat has arrived and finished the step before, and the
        live seats ahead of it in this step's order have finished this one."""
        live = self._live(seats)
        if any(entry.get("state") == "starting" for entry in live.values()):
            return False
        if any(int(entry.get("steps", 0)) < step and entry.get("state") != "finished" for entry in live.values()):
            return False
        order = self.order(step)
        ahead = order[:order.index(self.seat.seat)]
        return all(int(live[i].get("steps", 0)) > step or live[i].get("state") == "finished"
                   for i in ahead if i in live)

    async def _wait_for(self, ready: Callable[[dict[str, dict[str, Any]]], bool], what: str) -> None:
        deadline = self.clock() + self.wait_s
        while True:
            if self._round.stopped:  # first: a stopped round takes no further step, even one that is its turn
                raise RoundStopped(f"round {self.seat.round_id} stopped while seat {self.seat.seat + 1} waited for "
                                   f"{what}")
            if ready(self._read()):
                return
            if self.clock() > deadline:
                raise TurnTimeout(f"round {self.seat.round_id}: seat {self.seat.seat} waited {self.wait_s:.0f} s "
                                  f"for {what}")
            await asyncio.sleep(POLL_S)

    def others(self) -> set[int]:
        """The processes of the round's other seats (their kernels; their engines are below them)."""
        return {int(e["pid"]) for i, e in self._read().items() if int(i) != self.seat.seat and e.get("pid")}

    def arrive(self) -> None:
        """This seat's engine serves: it counts toward the round's start."""
        self._set(pid=os.getpid(), state="ready", steps=self.steps_done)

    @contextlib.asynccontextmanager
    async def step(self) -> AsyncIterator[None]:
        """Hold the round's one turn for the next step of this seat."""
        step = self.steps_done
        await self._wait_for(lambda seats: self.my_turn(seats, step), f"its turn at step {step + 1}")
        try:
            yield
        finally:
            self.steps_done += 1
            self._set(steps=self.steps_done)

    async def handover(self, slice_index: int) -> None:
        """Inside a step: this slice is done; give the turn to the seats after this one, and take it back for the
        next slice (a step of its own, in that step's order)."""
        self.steps_done += 1
        self._set(steps=self.steps_done)
        step = self.steps_done
        await self._wait_for(lambda seats: self.my_turn(seats, step), f"its turn for slice {slice_index + 1} at step "
                                                                       f"{step + 1}")

    async def align(self) -> None:
        """Before a sliced cell: begin it on an even step, so its slices pair with their mirrors (an empty turn)."""
        if self.steps_done % 2:
            async with self.step():
                pass

    async def finish(self) -> None:
        """Every step measured: wait until the other seats have measured theirs (or left), then leave."""
        self._set(state="finished", steps=self.steps_done)
        await self._wait_for(lambda seats: all(e.get("state") == "finished" for e in self._live(seats).values()),
                             "the round's other seats to finish")
        self.leave()

    def leave(self) -> None:
        """Out of the round (done, failed or interrupted): no seat waits for this one any more."""
        self._set(state="gone", steps=self.steps_done)


class NoTurns:
    """A run measured on its own: every step is its turn."""

    steps_done = 0

    def others(self) -> set[int]:
        return set()

    def arrive(self) -> None:
        return None

    @contextlib.asynccontextmanager
    async def step(self) -> AsyncIterator[None]:
        yield

    async def handover(self, slice_index: int) -> None:
        return None

    async def align(self) -> None:
        return None

    async def finish(self) -> None:
        return None

    def leave(self) -> None:
        return None


def turns_for(seat: Seat | None) -> Turns | NoTurns:
    return Turns(seat) if seat is not None else NoTurns()
