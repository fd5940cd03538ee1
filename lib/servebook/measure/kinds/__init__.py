"""One home per cell kind: decode, prefill, reuse, wave, load, replay, and capacity (derived from load probes).

Every module of this package but `base` and `registry` is a kind that registers itself on import; a kind with
machinery of its own is a package (agents, replay, capacity, prefill) whose `__init__` is the kind.
"""

import importlib
import pkgutil

from .base import CellKind, CellSpec, KindBase, OnDone, Window
from .registry import cell_line, kind_of, kinds, label, plan_cells, register, traits_of, unregister

__all__ = ["CellKind", "CellSpec", "KindBase", "OnDone", "Window", "cell_line", "kind_of", "kinds", "label", "plan_cells",
           "register", "traits_of", "unregister"]

for _module in pkgutil.iter_modules(__path__):
    if _module.name not in ("base", "registry"):
        importlib.import_module(f"{__name__}.{_module.name}")
