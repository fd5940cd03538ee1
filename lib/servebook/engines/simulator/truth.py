"""What the simulator would do for a candidate, without launching it: the candidate's engine command line, read
by the simulator's own flag parser into its timing model. Searches and verdicts are scored against this truth."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import TimingModel, parse_engine_argv

if TYPE_CHECKING:
    from ...config.candidate import Candidate


def timing_for(candidate: "Candidate") -> TimingModel:
    from .. import get_engine

    argv = get_engine(candidate.engine).argv(candidate, port=1, model_path=candidate.model.path or "model",
                                             draft_path=candidate.knobs.drafter.model)
    return parse_engine_argv(candidate.engine, argv, set()).timing
