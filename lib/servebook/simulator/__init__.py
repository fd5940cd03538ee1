"""A simulated engine (a test double): each engine's API shapes, readiness, counters and faults on a CPU."""

from .config import FAULTS, FLAVORS, SimConfig, parse_engine_argv
from .server import main

__all__ = ["FAULTS", "FLAVORS", "SimConfig", "main", "parse_engine_argv"]
