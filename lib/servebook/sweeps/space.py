"""A search space: every combination of the knobs' values, named like a study's axes, and placed in a unit cube
so that a surrogate model can tell near configurations from far ones.

Numeric knobs whose values span a factor of 4 or more (slots, chunk sizes) are placed on a log scale, where
their effects are closer to even; categorical knobs (a drafter's settings, a KV dtype) are one-hot, so every
two choices are equally far apart.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from typing import Any

from ..config.study import combo_name


@dataclass(frozen=True)
class Config:
    name: str
    overrides: dict[str, Any]
    features: tuple[float, ...]


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


class Space:
    def __init__(self, knobs: dict[str, list[Any]]):
        self.knobs = knobs
        self.numeric = {name: _numeric(values) for name, values in knobs.items()}
        self.log = {name: self.numeric[name] and min(values) > 0 and max(values) / min(values) >= 4
                    for name, values in knobs.items()}

    def _position(self, name: str, value: Any) -> list[float]:
        values = self.knobs[name]
        if not self.numeric[name]:
            return [1.0 if _key(value) == _key(v) else 0.0 for v in values]
        scale = math.log if self.log[name] else float
        low, high = scale(min(values)), scale(max(values))
        return [0.0 if high == low else (scale(value) - low) / (high - low)]

    def configs(self) -> list[Config]:
        """Every combination, in the order the knobs and values are listed."""
        out = []
        names = list(self.knobs)
        for values in itertools.product(*self.knobs.values()):
            overrides = dict(zip(names, values, strict=True))
            features = tuple(x for name, value in overrides.items() for x in self._position(name, value))
            out.append(Config(combo_name(overrides), overrides, features))
        return out

    def describe(self) -> str:
        kinds = [f"{name.split('.')[-1]} ({len(values)} {'log-' if self.log[name] else ''}"
                 f"{'numeric' if self.numeric[name] else 'categorical'})" for name, values in self.knobs.items()]
        size = math.prod(len(v) for v in self.knobs.values())
        return f"{size} configurations: " + " x ".join(kinds)
