"""The knob-to-flag map: each engine writes it once, and it is read three ways.

An adapter's `flags` maps a candidate field (`knobs.chunk_size`, `model.served_name`) to the engine flags that set
it. The same entry builds the command line (`command_args`), says which flags an `extra_args` entry may not
repeat (`owned`), and reads back what a launched engine was given (`on_command_line`), so the three cannot
disagree. Adding a knob to an engine is one field on its knob model and one entry here, in its module.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:
    from ..config.candidate import Candidate


@dataclass(frozen=True)
class Resolved:
    """What preflight resolved that a flag's value depends on (None in a dry run)."""

    draft_path: str | None = None
    backend: str | None = None


@dataclass(frozen=True)
class Flag:
    """The flags of one setting. `emit` are written, each followed by the value, unless `render` writes the
    arguments itself (from the value and what preflight resolved); `also` are the other spellings the engine reads
    as the same setting; `omit` is the value that writes nothing (None always does, unless `render` decides).
    `yields`: while the knob writes none of these flags, an extra_arg may give them (a knob added after studies
    passed its flag through extra_args, as vLLM studies did --reasoning-parser)."""

    emit: tuple[str, ...] = ()
    also: tuple[str, ...] = ()
    render: Callable[[Any, Resolved], list[str]] | None = None
    omit: Any = None
    yields: bool = False

    @property
    def spellings(self) -> tuple[str, ...]:
        return self.emit + self.also

    def args(self, value: Any, resolved: Resolved) -> list[str]:
        if self.render is not None:
            return self.render(value, resolved)
        if value is None or value == self.omit:
            return []
        return [part for flag in self.emit for part in (flag, str(value))]


def value_at(candidate: "Candidate", path: str) -> Any:
    """The candidate's field at a dotted path (knobs.chunk_size)."""
    value: Any = candidate
    for part in path.split("."):
        value = getattr(value, part)
    return value


def command_args(candidate: "Candidate", flags: Mapping[str, Flag], resolved: Resolved) -> list[str]:
    """Every mapped field of the candidate as its engine's arguments, in the order of the map."""
    return [arg for path, flag in flags.items() for arg in flag.args(value_at(candidate, path), resolved)]


def owned(flags: Mapping[str, Flag], launch_flags: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Knob -> every spelling of the flags it sets; "launch" for what servebook sets from launch and model."""
    out: dict[str, tuple[str, ...]] = {}
    for path, flag in flags.items():
        section, _, name = path.partition(".")
        key = name if section == "knobs" else "launch"
        out[key] = out.get(key, ()) + flag.spellings
    out["launch"] = launch_flags + out.get("launch", ())
    return out


#: the module that stands in for an engine (launch.simulator): `python -m SIMULATOR --flavor F -- <engine argv>`
SIMULATOR = "servebook.simulator"
#: the same module as runs recorded before it left engines/ name it (their argv is still read for the engine's part)
RECORDED_SIMULATORS = (SIMULATOR, "servebook.engines.simulator")


def simulated_argv(flavor: str, faults: list[str], argv: list[str]) -> list[str]:
    """The command line that runs servebook's simulator in place of the engine `argv` starts."""
    return [sys.executable, "-m", SIMULATOR, "--flavor", flavor, *[f"--fault={fault}" for fault in faults], "--", *argv]


def engine_argv(argv: list[str]) -> list[str]:
    """What the engine itself was given: `argv`, or where the simulator stands in for it, the part after its `--`
    (python's own `-m` before it is no llama.cpp model flag)."""
    if any(name in argv[:3] for name in RECORDED_SIMULATORS) and "--" in argv:
        return argv[argv.index("--") + 1:]
    return argv


def on_command_line(argv: list[str], flag: Flag) -> str | None:
    """What `argv` gave the engine for this setting ("-b 512 -ub 512"), or None when it gave nothing."""
    argv = engine_argv(argv)
    passed = [f"{arg} {argv[i + 1]}" if i + 1 < len(argv) and not argv[i + 1].startswith("-") else arg
              for i, arg in enumerate(argv) if arg.split("=", 1)[0] in flag.spellings]
    return " ".join(passed) or None


def flag_after(argv: list[str], spellings: tuple[str, ...]) -> str | None:
    """The value given after the first of `spellings` in `argv` (the model file after -m)."""
    argv = engine_argv(argv)
    return next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a in spellings), None)
