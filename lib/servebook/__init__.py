"""servebook: qualify LLM serving configurations and keep every run in a journal.

The notebook user's public face::

    import servebook as sb
    candidate = sb.load_candidate("data/candidates/tiny-llamacpp.yaml")
    record = sb.qualify(candidate_path="data/candidates/tiny-llamacpp.yaml")
    sb.report(record)                       # the run's tables
    study = sb.load_study("data/studies/tiny-demo.yaml")
    sb.sweep(study, sb.Journal("journal"))  # one papermill execution per candidate
    sb.judge(study, sb.Journal("journal"))  # verdicts with reasons
    sb.compare(study_path="data/studies/tiny-demo.yaml")
    sb.size_model("random:1b", gpu_gib=141, context_length=32768)  # memory arithmetic, replicas vs TP

Names are imported on first use, so `import servebook` stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from . import engines as _engines  # noqa: F401  (registers every built-in engine's candidate checks)
from ._version import __version__


def _brief_errors_in_ipython() -> None:
    import sys

    if "IPython" in sys.modules:  # only where a shell may run; never imports IPython itself
        from .util.ipython import show_errors_briefly

        show_errors_briefly()


_brief_errors_in_ipython()

_PUBLIC = {
    "Candidate": "config", "Plan": "config", "Study": "config", "VerdictRules": "config",
    "ServebookError": "util.errors", "InputError": "util.errors", "EngineFailed": "util.errors",
    "load_candidate": "config", "load_plan": "config", "load_study": "config",
    "Journal": "journal", "RunRecord": "journal", "Manifest": "journal",
    "run_candidate": "run",
    "judge": "verdicts", "Verdict": "verdicts", "noise_floor": "verdicts",
    "sweep": "sweeps", "dry_run": "sweeps",
    "build_site": "present", "report": "present", "RunReport": "present", "RunComparison": "present",
    "StudyView": "present", "VerdictsView": "present", "figures": "present", "size_model": "present",
    "MemoryView": "present", "StudyReport": "present", "study_report": "present",
    "qualify": "notebook", "compare": "notebook", "show": "notebook", "check_gate": "notebook",
    "GateFailed": "util.errors",
}

__all__ = sorted(_PUBLIC) + ["__version__"]


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'servebook' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # what static tools and editors see
    from .config import Candidate, Plan, Study, VerdictRules, load_candidate, load_plan, load_study
    from .journal import Journal, Manifest, RunRecord
    from .notebook import check_gate, compare, qualify, show
    from .present import (
        MemoryView,
        RunComparison,
        RunReport,
        StudyReport,
        StudyView,
        VerdictsView,
        build_site,
        figures,
        report,
        size_model,
        study_report,
    )
    from .run import run_candidate
    from .sweeps import dry_run, sweep
    from .util.errors import EngineFailed, GateFailed, InputError, ServebookError
    from .verdicts import Verdict, judge, noise_floor
