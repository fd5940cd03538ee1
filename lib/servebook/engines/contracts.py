"""What a released engine really accepts and exports, as recorded from its own code.

`scripts/record-engine-contracts.sh` installs a pinned SGLang or vLLM release in a throwaway
environment, imports its real argument parser and metric definitions, and writes
`lib/servebook/data/engine-contracts/<engine>-<version>.json` (package data, so an installed wheel checks
against them too): every flag with its aliases, type and choices, every Prometheus sample with its labels and
whether it exists at start, the server-info fields servebook reads, and how each study's dry-run command lines
parsed. The adapters are tested against it, and an adapter uses it at check time to tell a flag the engine does
not have from one it does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib.resources.abc import Traversable
from pathlib import Path

from ..util.resources import shipped

CONTRACTS_DIR = "engine-contracts"


def spelled_flag(flag: str, underscores: bool) -> str:
    """How a parser that reads `--max_num_seqs` as `--max-num-seqs` and `--a.b` as `--a` sees a flag (vLLM)."""
    if underscores and flag.startswith("--"):
        return "--" + flag[2:].split(".", 1)[0].replace("_", "-")
    return flag


@dataclass(frozen=True)
class Flag:
    options: tuple[str, ...]
    dest: str
    type: str | None = None
    choices: tuple[str, ...] | None = None
    nargs: str | None = None
    action: str = "store"


@dataclass(frozen=True)
class Metric:
    name: str
    type: str
    labels: tuple[str, ...]
    #: whether a fresh server exports a sample of it before any request (False: its labelled child appears at
    #: first use)
    at_start: bool
    #: a gauge's prometheus_client multiprocess mode (SGLang exports through a MultiProcessCollector, which adds a
    #: `pid` label to the gauges in "all" or "liveall" mode); None where not recorded
    multiprocess_mode: str | None = None

    @property
    def live_labels(self) -> tuple[str, ...]:
        """The labels a live multi-process server exports this metric with."""
        per_process = self.type == "gauge" and self.multiprocess_mode in ("all", "liveall")
        return tuple(sorted((*self.labels, "pid"))) if per_process else tuple(sorted(self.labels))


@dataclass(frozen=True)
class Contract:
    engine: str
    version: str
    recorded: str
    allow_abbrev: bool
    underscores: bool
    flags: tuple[Flag, ...]
    metrics: tuple[Metric, ...]
    server_info_fields: tuple[str, ...] = ()
    #: vLLM: its CacheDType values (its parser takes any string); samples that exist only with a drafter
    cache_dtypes: tuple[str, ...] = ()
    spec_only: frozenset[str] = frozenset()
    dry_runs: dict = field(default_factory=dict, hash=False, compare=False)

    def flag(self, option: str) -> Flag | None:
        option = self.spelled(option)
        return next((f for f in self.flags if option in f.options), None)

    def spelled(self, option: str) -> str:
        """How the engine's parser reads an option (vLLM: --max_num_seqs is --max-num-seqs, --a.b sets --a)."""
        return spelled_flag(option, self.underscores)

    def resolve(self, option: str) -> Flag | None:
        """The flag the parser would take `option` for: exact, else a unique prefix where abbreviation is on."""
        exact = self.flag(option)
        if exact is not None or not (self.allow_abbrev and option.startswith("--")):
            return exact
        option = self.spelled(option)
        matches = {f for f in self.flags for o in f.options if o.startswith(option)}
        return matches.pop() if len(matches) == 1 else None

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)


def _read(path: Traversable) -> Contract:
    raw = json.loads(path.read_text())
    return Contract(
        engine=raw["engine"], version=raw["version"], recorded=raw["recorded"],
        allow_abbrev=raw["parser"]["allow_abbrev"], underscores=raw["parser"]["underscores"],
        flags=tuple(Flag(tuple(f["options"]), f["dest"], f.get("type"),
                         None if f.get("choices") is None else tuple(map(str, f["choices"])), f.get("nargs"),
                         f.get("action", "store")) for f in raw["flags"]),
        metrics=tuple(Metric(m["name"], m["type"], tuple(m["labels"]), m["at_start"], m.get("multiprocess_mode"))
                      for m in raw["metrics"]),
        server_info_fields=tuple(raw.get("server_info_fields", ())), cache_dtypes=tuple(raw.get("cache_dtypes", ())),
        spec_only=frozenset(raw.get("spec_only_metrics", ())), dry_runs=raw.get("dry_runs", {}))


@cache
def recorded_contracts(data_dir: Path | None = None) -> dict[tuple[str, str], Contract]:
    folder = (data_dir or shipped()) / CONTRACTS_DIR
    found = [p for p in folder.iterdir() if p.name.endswith(".json")] if folder.is_dir() else []
    contracts = (_read(p) for p in sorted(found, key=lambda p: p.name))
    return {(c.engine, c.version): c for c in contracts}


def contract_for(engine: str, version: str | None) -> Contract | None:
    """The recorded contract of exactly this release (None: not recorded, or no version pinned)."""
    return recorded_contracts().get((engine, str(version))) if version else None
