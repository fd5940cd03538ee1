"""Dry runs: every step and command of a study, without building, generating, probing or launching anything."""

from __future__ import annotations

import functools
import itertools
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ..config.candidate import Candidate
from ..config.secrets import redact_argv
from ..config.study import Study, StudyEntry
from ..engines import get_engine
from ..journal import Journal
from .parameters import qualify_parameters, shown
from .pending import recorded


@dataclass
class DryRunEntry:
    entry: StudyEntry
    preflight: list[str]
    argv: list[str]
    compose_yaml: str | None = None
    compose_commands: list[list[str]] | None = None
    #: of the study's repeats, how many the journal holds already (completed, or a failed load); None: no journal
    recorded: int | None = None
    #: launch.replicas / launch.router on this host: every further replica's command line, then the router's
    more_commands: list[list[str]] | None = None
    #: what the run's execution of the qualify notebook is given (every parameter its parameters cell declares)
    parameters: list[str] | None = None


@dataclass
class DryRunPlan:
    """What a sweep would do: each candidate's lines, what is recorded, and roughly how long the rest takes."""

    entries: list[DryRunEntry]
    repeats: int
    #: the median seconds of this plan's runs in the journal (None: none recorded yet, no estimate)
    run_s: float | None = None

    @property
    def to_run(self) -> int:
        return sum(self.repeats - (e.recorded or 0) for e in self.entries)


def planned(study: Study, journal: Journal | None) -> DryRunPlan:
    """The dry run of `study` against what `journal` already holds (reading it only)."""
    entries = dry_run(study)
    for item in entries:
        where = journal.url or str(journal.root.resolve()) if journal is not None else "<the journal>"
        item.parameters = shown(study, item.entry, qualify_parameters(study, item.entry, where, "<reserved at start>"))
    if journal is None:
        return DryRunPlan(entries, study.repeats)
    for item in entries:
        item.recorded = sum(recorded(study, item.entry, journal, r, False) is not None for r in range(study.repeats))
    durations = []
    for record in journal.runs():
        manifest = record.manifest
        if record.status == "completed" and manifest is not None and manifest.plan_id == study.plan.id \
                and manifest.started_at and manifest.finished_at:
            span = datetime.fromisoformat(manifest.finished_at) - datetime.fromisoformat(manifest.started_at)
            durations.append(span.total_seconds())
    return DryRunPlan(entries, study.repeats, statistics.median(durations) if durations else None)


def dry_run(study: Study) -> list[DryRunEntry]:
    """The same lines whatever this host has built or cached: argv is pure, and the engine binary is named, not
    looked up (a CUDA build of llama.cpp adds -ngl 999 when nothing else sets gpu_layers)."""
    from ..launch.compose import render
    from ..launch.preflight import describe
    from ..models.random_models import model_file_name

    out = []
    for entry in study.expand():
        candidate = entry.candidate
        adapter = get_engine(candidate.engine)
        model = model_file_name(candidate.model.path or candidate.model.id, adapter.model_format) or ""
        draft = model_file_name(candidate.knobs.drafter.model, adapter.model_format)
        steps = describe(candidate)
        if candidate.launch.mode == "compose":
            plan = render(candidate, adapter, model_path=model, draft_path=draft,
                          first_port=candidate.launch.port or 30000)
            if not candidate.pins.image_digest:
                steps.append("W_UNPINNED: the image is not pinned by digest (set pins.image_digest)")
            out.append(DryRunEntry(entry, steps, plan.commands("compose.yaml")[1], plan.yaml(),
                                   plan.commands("compose.yaml")))
            continue
        if candidate.launch.mode == "attach":
            out.append(DryRunEntry(entry, steps, [f"(attach to {candidate.launch.url}; nothing is launched)"]))
            continue
        if candidate.launch.replicas > 1 or candidate.launch.router is not None:
            commands = _replica_commands(candidate, functools.partial(_argv_at, adapter, candidate, model, draft))
            out.append(DryRunEntry(entry, steps, commands[0], more_commands=commands[1:]))
            continue
        argv = adapter.argv(candidate, port=candidate.launch.port or 0, model_path=model, draft_path=draft)
        argv = ["<port: free>" if a == "0" and i and argv[i - 1] == "--port" else a for i, a in enumerate(argv)]
        out.append(DryRunEntry(entry, steps, redact_argv(argv)))
    return out


def _argv_at(adapter, candidate: Candidate, model, draft, port: int) -> list[str]:
    return adapter.argv(candidate, port=port, model_path=model, draft_path=draft)


def _replica_commands(candidate: Candidate, argv_for: Callable[[int], list[str]]) -> list[list[str]]:
    """Each replica's command line and the router's, with the ports a launch would pick free shown as such."""
    from ..launch.replicas import plan_replicas

    picked = itertools.count(1)  # stand-ins, named below: a dry run binds no socket
    plan = plan_replicas(candidate, argv_for, port_for=lambda: next(picked))
    free = {} if candidate.launch.port else {str(p): f"<port: free, replica {i}>" for i, p in enumerate(plan.ports)}
    if plan.router_port is not None:
        free[str(plan.router_port)] = "<port: free, router>"
        free[str(plan.router_metrics_port)] = "<port: free, router metrics>"

    def shown(argv: list[str]) -> list[str]:
        out: list[str] = []
        for arg in redact_argv(argv):
            url, _, port = arg.rpartition(":")
            if out and out[-1] in ("--port", "--prometheus-port"):
                arg = free.get(arg, arg)
            elif url.startswith("http") and port in free:  # the router's --worker-urls
                arg = f"{url}:{free[port]}"
            out.append(arg)
        return out

    return [shown(argv) for argv in plan.argvs] + ([shown(plan.router_argv)] if plan.router_argv else [])
