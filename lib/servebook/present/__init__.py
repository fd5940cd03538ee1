"""How runs, journals, studies and verdicts are shown: tables, figures, views and the static site."""

from . import figures
from .comparison import RunComparison, config_diff
from .site.builder import BuildReport, build_site
from .views import DryRunView, RunReport, StudyView, VerdictsView, report

__all__ = ["BuildReport", "DryRunView", "RunComparison", "RunReport", "StudyView", "VerdictsView", "build_site",
           "config_diff", "figures", "report"]
