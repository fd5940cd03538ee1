"""Resident rounds: seats measure one at a time, cell-major, in rotating order, and never wait on a seat that is
gone (left, released by the sweep, or dead)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time

import pytest

from servebook.config.parameters import Seat
from servebook.measure.turns import RoundStopped, Turns, TurnTimeout, release, stop_round


def _seats(tmp_path, n: int) -> list[Seat]:
    return [Seat(round_id="round-test", directory=str(tmp_path), seat=i, seats=n) for i in range(n)]


def _play(seat: Seat, steps: int, log: list, lock: threading.Lock, *, leave_after: int | None = None,
          start_delay: float = 0.0) -> None:
    async def go() -> None:
        await asyncio.sleep(start_delay)
        turns = Turns(seat, wait_s=20)
        turns.arrive()
        try:
            for step in range(steps):
                if leave_after is not None and step == leave_after:
                    return
                async with turns.step():
                    with lock:
                        log.append(("start", seat.seat, step, time.monotonic()))
                    await asyncio.sleep(0.02)
                    with lock:
                        log.append(("end", seat.seat, step, time.monotonic()))
            await turns.finish()
        finally:
            turns.leave()

    asyncio.run(go())


def _run(seats: list[Seat], steps: int, **per_seat) -> list:
    log: list = []
    lock = threading.Lock()
    threads = [threading.Thread(target=_play, args=(seat, steps, log, lock), kwargs=per_seat.get(str(seat.seat), {}))
               for seat in seats]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    return log


def test_one_seat_measures_at_a_time_cell_major_in_rotating_order(tmp_path):
    seats = _seats(tmp_path, 3)
    log = _run(seats, steps=4, **{"2": {"start_delay": 0.3}})  # the late seat holds the start
    starts = [(seat, step) for kind, seat, step, _ in log if kind == "start"]
    orders = [Turns(seats[0]).order(step) for step in range(4)]
    assert starts == [(seat, step) for step in range(4) for seat in orders[step]]
    first = orders[0][0]
    assert orders[0] == [first, (first + 1) % 3, (first + 2) % 3]
    assert orders[2] == orders[0][1:] + orders[0][:1]  # rotated by one each pair of steps
    held = 0
    for kind, *_ in log:
        held += 1 if kind == "start" else -1
        assert held in (0, 1)


def test_odd_steps_mirror_even_ones_so_every_seat_has_the_same_mean_position(tmp_path):
    turns = Turns(_seats(tmp_path, 5)[0])
    for step in range(0, 10, 2):
        forward, backward = turns.order(step), turns.order(step + 1)
        assert backward == forward[::-1]
        assert {forward.index(seat) + backward.index(seat) for seat in range(5)} == {4}


def test_rounds_start_their_rotation_at_different_seats(tmp_path):
    firsts = {Turns(Seat(round_id=f"round-{i}", directory=str(tmp_path), seat=0, seats=4)).order(0)[0]
              for i in range(12)}
    assert len(firsts) > 1


def _play_sliced(seat: Seat, log: list, lock: threading.Lock) -> None:
    """A warm-up step, then a cell of two slices with the turn handed over between them (as decode sends it)."""
    async def go() -> None:
        turns = Turns(seat, wait_s=20)
        turns.arrive()
        try:
            async with turns.step():
                pass
            await turns.align()
            async with turns.step():
                for index in range(2):
                    if index:
                        await turns.handover(index)
                    with lock:
                        log.append((seat.seat, index, turns.steps_done))
                    await asyncio.sleep(0.02)
            await turns.finish()
        finally:
            turns.leave()

    asyncio.run(go())


def test_a_sliced_cell_begins_on_an_even_step_and_its_slices_go_forward_then_back(tmp_path):
    seats = _seats(tmp_path, 3)
    log: list = []
    lock = threading.Lock()
    threads = [threading.Thread(target=_play_sliced, args=(seat, log, lock)) for seat in seats]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert {step for _, index, step in log if index == 0} == {2}  # step 1 was the empty turn that aligned it
    first = [seat for seat, index, _ in log if index == 0]
    second = [seat for seat, index, _ in log if index == 1]
    assert first == Turns(seats[0]).order(2) and second == first[::-1]
    assert [index for _, index, _ in log] == [0, 0, 0, 1, 1, 1]


def test_a_seat_that_leaves_early_does_not_hold_the_others(tmp_path):
    log = _run(_seats(tmp_path, 3), steps=3, **{"1": {"leave_after": 1}})
    starts = [(seat, step) for kind, seat, step, _ in log if kind == "start"]
    assert (1, 1) not in starts and (1, 2) not in starts
    assert sorted(s for s in starts if s[0] != 1) == [(0, 0), (0, 1), (0, 2), (2, 0), (2, 1), (2, 2)]


def test_a_seat_released_by_the_sweep_or_dead_is_passed_over(tmp_path):
    seats = _seats(tmp_path, 3)
    release(seats[1])  # its notebook returned before its engine served (a failed load)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    from servebook.measure.turns import _RoundState

    _RoundState(seats[2]).set(2, pid=int(dead.stdout), state="ready", steps=0)  # its kernel died mid-round
    turns = Turns(seats[0], wait_s=5)
    turns.arrive()

    async def three_steps() -> int:
        for _ in range(3):
            async with turns.step():
                pass
        await turns.finish()
        return turns.steps_done

    assert asyncio.run(three_steps()) == 3


def test_a_seat_that_never_comes_is_a_bounded_wait(tmp_path):
    seats = _seats(tmp_path, 2)
    turns = Turns(seats[0], wait_s=0.3)
    turns.arrive()

    async def first_step() -> None:
        async with turns.step():
            pass

    with pytest.raises(TurnTimeout, match="waited"):
        asyncio.run(first_step())
    assert os.path.exists(tmp_path / "round-test.turns.json")


def test_a_stopped_round_takes_no_further_step_and_seats_no_one_else(tmp_path):
    """The sweep stops a round on Ctrl-C: a seat waiting for its turn (or whose turn it is) stops there, and a seat
    not begun yet does not begin (nothing of its run is recorded)."""
    seats = _seats(tmp_path, 2)
    waiting = Turns(seats[0], wait_s=20)
    waiting.arrive()
    stop_round(seats[0])

    async def next_step() -> None:
        async with waiting.step():
            raise AssertionError("a stopped round took a step")

    with pytest.raises(RoundStopped, match="stopped while seat 1 waited"):
        asyncio.run(next_step())
    assert waiting.steps_done == 0
    with pytest.raises(RoundStopped, match="before seat 2 began"):
        Turns(seats[1])
