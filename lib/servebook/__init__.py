"""servebook: qualify LLM serving configurations and keep every run in a journal."""

__version__ = "0.1.0"

from .candidate import Candidate, InputError, load_candidate  # noqa: E402
from .journal import Journal, RunRecord  # noqa: E402
from .plan import Plan, load_plan  # noqa: E402
from .runner import run_candidate  # noqa: E402

__all__ = ["Candidate", "InputError", "Journal", "Plan", "RunRecord", "load_candidate", "load_plan", "run_candidate", "__version__"]
