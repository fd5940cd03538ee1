"""Running a coroutine to completion from synchronous code, wherever that code runs."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_blocking(make_coroutine: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """asyncio.run, also from inside a Jupyter kernel, whose thread already runs an event loop (the coroutine
    then runs on a thread of its own)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make_coroutine())
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="servebook-async") as pool:
        return pool.submit(lambda: asyncio.run(make_coroutine())).result()
