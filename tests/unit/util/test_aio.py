"""run_blocking inside a running event loop (a Jupyter kernel's thread): an interrupt stops the coroutine at once."""

import asyncio
import os
import signal
import threading
import time

import pytest

from servebook.util.aio import run_blocking


def test_an_interrupt_in_a_kernel_cancels_the_coroutine_within_a_second():
    cleaned = []

    async def long_plan():
        try:
            await asyncio.sleep(30)
        finally:
            cleaned.append(time.monotonic())  # the measurement's cleanup: requests cancelled, tables written

    async def kernel_cell():  # what a notebook cell is: code running while the kernel's loop runs
        signal.signal(signal.SIGINT, signal.default_int_handler)  # ipykernel's handler while a cell executes
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            run_blocking(long_plan)
        return time.monotonic() - started

    took = asyncio.run(kernel_cell())
    assert took < 1.5 and len(cleaned) == 1


def test_outside_a_loop_it_is_asyncio_run():
    async def answer():
        return 42

    assert run_blocking(answer) == 42
