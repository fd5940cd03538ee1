"""Sweeps: one run per study candidate and repeat, interleaved, each through a runner (papermill executions of
notebooks/qualify.ipynb by default, Ray tasks in servebook.distributed), then judged.

The sweep validates the whole study before anything launches, skips runs already recorded under the
same candidate and plan hashes (pending.py holds the one skip policy), keeps going past failed
candidates, and stores each executed notebook in its run. Named `sweeps` so the package never
shadows `servebook.sweep`, the function.
"""

from .dryrun import DryRunEntry, dry_run
from .gpus import gpu_lanes_for, gpus_needed
from .orchestrate import check_study_fits, run_pending, sweep, until_decided
from .pending import SweepResult, counted_statuses, interleaved, recorded
from .placement import Lane, gpu_lanes, lane_for, place
from .runner import QUALIFY_NOTEBOOK, PapermillRunner, Runner
from .search import SearchResult, search

__all__ = ["QUALIFY_NOTEBOOK", "DryRunEntry", "Lane", "PapermillRunner", "Runner", "SweepResult",
           "check_study_fits", "counted_statuses", "dry_run", "gpu_lanes", "gpu_lanes_for", "gpus_needed",
           "interleaved", "lane_for", "place", "recorded", "run_pending", "search", "SearchResult", "sweep", "until_decided"]
