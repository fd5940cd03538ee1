"""A simulated engine (a test double): each engine's API shapes, readiness, counters and faults on a CPU."""

from .server import FAULTS, FLAVORS, main

__all__ = ["FAULTS", "FLAVORS", "main"]
