"""A run from end to end: begun, executed, sealed. Faults are raised where they happen and caught
once, here, where the run is sealed.

A server that never becomes ready, or dies, yields a sealed `failed` run with its classified cause
and log tail and no summary numbers. Ctrl-C (Kernel > Interrupt in Jupyter) stops the engine and
seals the run `interrupted` with the cells it finished; verdicts leave such a run out.
"""

from __future__ import annotations

from typing import Any

from ..config.candidate import Candidate
from ..config.parameters import Seat
from ..config.plan import Plan
from ..journal import Journal, RunRecord
from ..measure.turns import RoundStopped
from ..util.errors import EngineFailed, InputError
from ..util.progress import Reporter
from .context import RunContext
from .sealing import Ended, ended


def run_candidate(candidate: Candidate, plan: Plan, journal: Journal, *,
                  reporter: Reporter | None = None, extra_manifest: dict[str, Any] | None = None,
                  run_id: str | None = None, seat: Seat | None = None,
                  lane: str | None = None) -> RunRecord:
    """Launch `candidate`, measure `plan`, seal the run in `journal` and return it as recorded.

    `extra_manifest` adds context (the study and the name of the candidate in it);
    `run_id` lets a sweep choose the run's directory name before the notebook starts;
    `seat`: the run's place in a resident round, whose runs measure in turn (measure.turns);
    `lane`: the GPU group or node a parallel or Ray sweep placed the run on (recorded as
    environment.lane). Bad input raises InputError before anything is recorded; an engine that
    fails, or a disk that fills, yields a sealed `failed` run (DiskFull, before anything is
    recorded, when the disk cannot hold back what a seal needs).
    """
    run = RunContext.begin(candidate, plan, journal, reporter or Reporter(),
                           extra_manifest=extra_manifest, run_id=run_id, seat=seat, lane=lane)
    try:
        run.execute()
    except EngineFailed as error:
        return run.sealing.seal(_ended(run), error)
    except InputError:
        if not run.log.outcomes:  # bad input found once the engine answered: nothing measured
            run.writer.abandon()  # and nothing is kept
        raise
    except (KeyboardInterrupt, RoundStopped):  # the engine is stopped already (execute's finally)
        raise run.sealing.seal_interrupted(_ended(run)) from None
    return run.sealing.seal(_ended(run), None)


def _ended(run: RunContext) -> Ended:
    return ended(run.environment, run.target, run.engine, run.ready, run.engine_identity,
                 run.measure_s)
