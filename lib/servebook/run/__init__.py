"""One run, in stages, each its own module and record (as asv's commands/run.py -> runner.py ->
results.py):

- `entry`: `run_candidate`, the run from end to end, where every fault is caught once and the run
  sealed;
- `context`: `RunContext`, the stages (`begin`, `execute`: `launch`, `measure`), with the one engine
  adapter looked up for the run and handed down;
- `setup`: what is decided before the engine starts (the launch record, the environment, the engine
  object);
- `endpoint`: the engine as the measurement sees it once it answers;
- `sealing`: the raw tables and the manifest, composed from the launch's frozen records
  (`launch.ready.Ready`, `launch.identity.EngineIdentity`).
"""

from .context import RunContext
from .entry import run_candidate

__all__ = ["RunContext", "run_candidate"]
