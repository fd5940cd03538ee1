"""How runs, journals, studies and verdicts are shown: tables, figures, views and the static site."""

from . import figures
from .comparison import RunComparison, config_diff
from .report import StudyReport, study_report
from .run_summary import RunSummary, run_summary
from .site.builder import BuildReport, build_site
from .views import DryRunView, MemoryView, RunReport, StudyView, VerdictsView, report, size_model

__all__ = ["BuildReport", "DryRunView", "MemoryView", "size_model", "RunComparison", "RunReport", "StudyView",
           "VerdictsView", "build_site", "StudyReport", "study_report",
           "config_diff", "figures", "report", "RunSummary", "run_summary"]
