"""An engine started and waited for, as one frozen record: how long it took to answer, the CPUs its
threads were held to, and the memory arithmetic its load log allows.

An engine that does not come up is EngineFailed at stage launch, with the cause its log gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config.candidate import Candidate
from ..engines.sizing import logged_memory_check
from ..util.errors import EngineFailed
from ..util.progress import Reporter
from .process import Engine

if TYPE_CHECKING:
    from ..engines import EngineAdapter

#: holds an engine's process tree to CPUs and says how many threads it held
#: (measure.observers.host.pin_engine: launch is handed it, it does not reach into measure)
Pin = Callable[[int, list[int]], int]


@dataclass(frozen=True)
class Ready:
    """A started engine that answers."""

    #: seconds from start to the first healthy answer
    ready_s: float
    #: launch.cpus: the CPUs the engine's threads were held to once it served, and how many
    #: threads were held
    pinned: dict[str, Any] | None = None
    #: the model's KV arithmetic against the KV cache the engine logged at load (llama.cpp)
    memory: dict[str, Any] | None = None


def bring_up(engine: Engine, candidate: Candidate, adapter: EngineAdapter, argv: list[str],
             engine_log: Path, reporter: Reporter, pin: Pin) -> Ready:
    """Start `engine` and wait until it answers; then hold it to launch.cpus and read its memory
    arithmetic back from its log. `argv`: its recorded command line (which names the model file)."""
    try:
        engine.start()
        with reporter.task(f"start {candidate.engine} and wait for readiness") as task:
            ready_s = engine.wait_ready(candidate.launch.ready_timeout_s,
                                        on_poll=lambda s: task.update(s))
    except EngineFailed as error:
        error.at("launch")
        raise
    cpus, pinned = candidate.launch.cpus, None
    if cpus and engine.pid:
        pinned = {"cpus": cpus, "threads": pin(engine.pid, cpus)}
    memory = logged_memory_check(adapter, adapter.model_file(argv), engine_log)
    return Ready(round(ready_s, 3), pinned, memory)
