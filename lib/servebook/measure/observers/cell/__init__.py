"""Cell observers: what is watched beside every cell, each one module of this package that registers itself on
import (base.py says what an observer is). A new covariate is its module here and its test; the loop starts every
registered observer before a cell, stops it after, and puts its figures in the cell's row, its raw rows in
telemetry.parquet and its evidence into the cell's validity (tests/unit/measure/test_example_observer.py).

Only the loop imports this package, so an observer may read anything of measure/ below the loop.
"""

import importlib
import pkgutil

from .base import CellObserver, ObserverFactory, Watched, cell_observers, register_observer, unregister_observer

__all__ = ["CellObserver", "ObserverFactory", "Watched", "cell_observers", "register_observer", "unregister_observer"]

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")
