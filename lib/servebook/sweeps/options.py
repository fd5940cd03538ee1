"""How a study is run, apart from what runs it: the options of a sweep or a search, and what each runner can do
with them. A runner declares its capabilities; an option it lacks is refused by its flag before anything starts,
so no option is ever dropped silently (`sweep --ray` once ignored `--until-decided`, `--parallel` and `--gpus`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from ..config.study import StudyEntry
from ..util.errors import InputError
from ..util.progress import Reporter
from .placement import Lane

Capability = Literal["gpu_lanes", "resident", "looks", "time_budget"]


@dataclass(frozen=True)
class Capabilities:
    """What a runner can honour. `flag` and `why` are said when an option is refused ("--ray", and why not)."""

    flag: str = ""
    why: str = ""
    #: --parallel / --gpus: this host's GPUs shared out in groups, one run at a time on each
    gpu_lanes: bool = True
    #: --resident / --seats: a round's engines side by side on this machine, measured in turn
    resident: bool = True
    #: --until-decided: the verdicts read between runs to choose the next ones
    looks: bool = True
    #: --time-budget: a run starts only while the time left holds one
    time_budget: bool = True
    #: runs sealed on other hosts: the journal is pulled before the driver reads them
    sealed_elsewhere: bool = False


#: a runner that declares nothing runs in this process or its kernels, on this machine: every option applies
LOCAL = Capabilities()


@dataclass(frozen=True)
class Placement:
    """Where the runs go: lanes of the cyclic design (None: no lanes), and how many runs are in flight at once on
    lanes that are not local GPU groups (a GPU lane always runs one run at a time)."""

    lanes: list[Lane] | None = None
    workers: int = 1


@dataclass(frozen=True)
class SweepOptions:
    """The options of one way of running a study, as the CLI's flags set them."""

    retry_failed: bool = False
    #: --until-decided --max-repeats N; None: the study's repeats only
    max_repeats: int | None = None
    #: 1 (serial), "auto", or a number of candidates at once on disjoint GPU groups
    parallel: str | int = 1
    gpus: list[int] | None = None
    time_budget_s: float | None = None
    resident: bool = False
    seats: int | None = None

    def asked(self) -> list[tuple[str, Capability]]:
        """(flag, the capability it needs) for every option given."""
        given: list[tuple[str, Capability, bool]] = [
            ("--until-decided", "looks", self.max_repeats is not None),
            ("--parallel", "gpu_lanes", self.parallel not in (1, "1")),
            ("--gpus", "gpu_lanes", self.gpus is not None),
            ("--time-budget", "time_budget", self.time_budget_s is not None),
            ("--resident", "resident", self.resident),
            ("--seats", "resident", self.seats is not None),
        ]
        return [(flag, capability) for flag, capability, on in given if on]

    @property
    def residents(self) -> bool:
        """Resident rounds: asked for, or implied by a number of seats."""
        return self.resident or self.seats is not None


def capabilities_of(runner: Any) -> Capabilities:
    """The runner's declared capabilities; a runner that declares none is a local one."""
    declared = getattr(runner, "capabilities", LOCAL)
    return declared if isinstance(declared, Capabilities) else LOCAL


def refuse_unsupported(options: SweepOptions, runner: Any, *, only: set[str] | None = None, what: str = "") -> None:
    """Every option the runner cannot honour, refused at once by its flag. `only`: the flags this way of running a
    study takes at all (a search has no --until-decided); `what` names it in that refusal."""
    if only is not None and (extra := [flag for flag, _ in options.asked() if flag not in only]):
        raise InputError(f"{', '.join(extra)}: not with {what} (it takes {', '.join(sorted(only)) or 'none of them'})")
    capabilities = capabilities_of(runner)
    dropped = [flag for flag, capability in options.asked() if not getattr(capabilities, capability)]
    if dropped:
        name = capabilities.flag or f"the {type(runner).__name__}"
        why = f" ({capabilities.why})" if capabilities.why else ""
        raise InputError(f"{', '.join(dropped)}: not with {name}{why}; drop one of them")


def parse_parallel(text: str) -> str | int:
    """--parallel as given: auto, a number, or (refused where lanes are made, with the fix) anything else."""
    return text if text == "auto" else (int(text) if text.isdigit() else text)


def parse_gpus(text: str | None) -> list[int] | None:
    """--gpus 0,1,2,3 as indices."""
    try:
        return [int(g) for g in text.split(",")] if text else None
    except ValueError:
        raise InputError(f"--gpus {text!r}: comma-separated GPU indices, e.g. 0,1,2,3") from None


@runtime_checkable
class PlacesItself(Protocol):
    """A runner that knows where its runs can go (a cluster's nodes) better than this host's GPU list does."""

    def placement(self, entries: list[StudyEntry], reporter: Reporter) -> Placement:
        """The lanes and the runs in flight at once, asked once before the first run."""
        ...
