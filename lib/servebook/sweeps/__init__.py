"""Sweeps: one run per study candidate and repeat, interleaved, each through a runner (papermill executions of
notebooks/qualify.ipynb by default, Ray tasks in servebook.distributed), then judged. Every way of running a
study, a search included, goes through one orchestration (orchestrate.py), and an option its runner cannot honour
is refused by its flag (options.py).

The sweep validates the whole study before anything launches, skips runs already recorded under the
same candidate and plan hashes (pending.py holds the one skip policy), keeps going past failed
candidates, and stores each executed notebook in its run. Named `sweeps` so the package never
shadows `servebook.sweep`, the function.
"""

from .dryrun import DryRunEntry, dry_run
from .gpu_lanes import gpu_lanes_for, gpus_needed
from .options import Capabilities, Placement, SweepOptions
from .orchestrate import Orchestration, check_study_fits, orchestration, run_pending, sweep, until_decided
from .pending import SweepResult, counted_statuses, interleaved, recorded
from .placement import Lane, gpu_lanes, lane_for, place
from .runner import QUALIFY_NOTEBOOK, PapermillRunner, Runner
from .search import SearchResult, search

__all__ = ["QUALIFY_NOTEBOOK", "Capabilities", "check_study_fits", "counted_statuses", "dry_run", "DryRunEntry",
           "gpu_lanes", "gpu_lanes_for", "gpus_needed", "interleaved", "Lane", "lane_for", "Orchestration",
           "orchestration", "PapermillRunner", "place", "Placement", "recorded", "run_pending", "Runner",
           "search", "SearchResult", "sweep", "SweepOptions", "SweepResult", "until_decided"]
