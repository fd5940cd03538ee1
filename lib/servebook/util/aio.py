"""Running a coroutine to completion from synchronous code, wherever that code runs."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
#: how long an interrupted coroutine may take to clean up (stop its requests) before the interrupt goes on anyway
CLEANUP_S = 30.0


def run_blocking(make_coroutine: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """asyncio.run, also from inside a Jupyter kernel, whose thread already runs an event loop (the coroutine
    then runs on a thread of its own).

    Kernel > Interrupt raises KeyboardInterrupt in the kernel's thread, not in the coroutine's: the coroutine is
    cancelled then, as asyncio.run cancels it on Ctrl-C, and the interrupt goes on once it has cleaned up (within a
    second, not at the end of the plan)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make_coroutine())
    running: dict[str, Any] = {}
    started = threading.Event()

    async def main() -> T:
        running["loop"], running["task"] = asyncio.get_running_loop(), asyncio.current_task()
        started.set()
        return await make_coroutine()

    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="servebook-async")
    future = pool.submit(asyncio.run, main())
    try:
        return future.result()
    except KeyboardInterrupt:
        if started.wait(CLEANUP_S):
            running["loop"].call_soon_threadsafe(running["task"].cancel)
        try:
            future.result(timeout=CLEANUP_S)
        except BaseException:  # noqa: BLE001 - the cancellation itself, or whatever the cleanup raised
            pass
        raise
    finally:
        pool.shutdown(wait=False)
