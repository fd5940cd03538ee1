"""What a notebook or terminal user displays: runs, studies, verdicts and dry runs, through one rendering path."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..config.metrics import measured_by
from ..config.study import Study
from ..journal.store import RunRecord
from ..sweeps.dryrun import DryRunPlan
from ..util.frames import frame_records
from ..util.render import Block, Renderable, Style, Table, Text
from ..verdicts.judge import Judgement
from .load_tables import LATENCY_DEFINITIONS, capacity_text, cell_tables
from .replica_tables import REPLICA_DEFINITIONS, REPLICA_TITLE
from .tables import DECODE_DEFINITIONS, PREFILL_DEFINITIONS, fit_table, memory_table, verification_table

if TYPE_CHECKING:
    from ..engines.sizing import ModelShape


@dataclass
class RunReport(Renderable):
    """A run's tables, or its failure cause and log tail."""

    run: RunRecord

    def cells(self) -> list[dict]:
        """The run's cells with its objectives on each, and the latency percentiles a run recorded before they
        existed computes from its raw requests and chunks (in memory: a read writes nothing)."""
        # a degraded run keeps every cell it measured (one of its replicas died while the others served)
        if self.run.status not in ("completed", "incomplete", "interrupted", "degraded"):
            return []
        from ..measure.figures.latency_tables import with_latency
        from .frontier import frontier_context

        cells = self.run.table("cells")
        if cells is None or cells.empty:
            return []
        cells = with_latency(cells, self.run.table("requests"), self.run.table("chunks"))
        identity = self.run.identity
        context = frontier_context(identity.plan, identity.candidate, 0)
        return [{**{k: (None if v is None or v != v else v) for k, v in row.items()}, **context}
                for row in frame_records(cells)]

    def tables(self) -> list[Table]:
        cells = self.cells()
        return cell_tables(cells) if cells else []

    def blocks(self) -> list[Block]:
        run, manifest = self.run, self.run.manifest
        blocks: list[Block] = [Text(f"run {run.run_id}  {run.candidate_label}  status: {run.status}", "heading")]
        if run.status == "incomplete":
            finished = run.table("cells")
            kept = f"; its {len(finished)} finished cells are below" if finished is not None else ""
            blocks.append(Text(f"incomplete: the run has no manifest (interrupted, killed, or still running){kept}.",
                               "invalid"))
        if run.problem:
            blocks.append(Text(run.problem, "invalid"))
        failure = manifest.failure if manifest else None
        if run.status == "interrupted" and failure is not None:
            blocks.append(Text(failure.message, "warn"))
        elif run.status == "degraded" and failure is not None:
            blocks.append(Text(f"degraded: {failure.text}", "warn"))
        elif failure is not None:
            blocks.append(Text(f"failed during {failure.stage}: {failure.text}", "invalid"))
            if failure.log_tail:
                tail = "\n".join(failure.log_tail.splitlines()[-10:])
                blocks.append(Text("engine log tail:\n" + tail, "dim", pre=True))
        cells = self.cells()
        capacity = [c for c in cells if c.get("kind") == measured_by("capacity_rps")]
        if capacity:
            blocks += [Text(f"capacity: {capacity_text(c)}", "heading") for c in capacity]
        tables = cell_tables(cells) if cells else []
        blocks += tables
        if tables:
            blocks.append(Text(" ".join(DECODE_DEFINITIONS[:3] + PREFILL_DEFINITIONS[:1] + LATENCY_DEFINITIONS),
                               "dim"))
        if any(t.title == REPLICA_TITLE for t in tables):
            blocks.append(Text(" ".join(REPLICA_DEFINITIONS), "dim"))
        for extra in (verification_table(manifest.engine.verification if manifest else None),
                      memory_table(manifest.engine.memory if manifest else None)):
            if extra is not None:
                blocks.append(extra)
        return blocks


def report(record: RunRecord) -> RunReport:
    """The full report of a run (its tables), for `display()` in a notebook or `rich.print`."""
    return RunReport(record)


@dataclass
class StudyView(Renderable):
    """The candidates a study expands into, with their ids and overrides."""

    study: Study

    def blocks(self) -> list[Block]:
        entries = self.study.expand()
        table = Table(["candidate", "id", "overrides"],
                      title=f"study {self.study.name}: {len(entries)} candidates, plan {self.study.plan.id}, "
                            f"rules {self.study.verdict.hash}")
        for entry in entries:
            overrides = ", ".join(f"{k}={v}" for k, v in entry.overrides.items()) or "(base)"
            table.add([entry.name, entry.candidate.id, overrides])
        return [table]


@dataclass
class VerdictsView(Renderable):
    """A study's verdicts: one row per candidate, with every reason; and the baseline's noise floor."""

    judged: list  # of verdicts.Judged
    noise: list = field(default_factory=list)  # of verdicts.NoiseFloor

    def blocks(self) -> list[Block]:
        blocks: list[Block] = Judgement(self.judged, getattr(self.judged, "baseline", None)).blocks()
        return blocks + noise_blocks(self.noise)


def noise_notes(noise: list) -> list[str]:
    """Why the floor and the verdicts part, one line per cell where they do, numbered as the table marks them."""
    parted = [n for n in noise if n.disagreement()]
    return [f"({i}) {n.metric}, {n.cell_id}: {n.disagreement()}" for i, n in enumerate(parted, 1)]


def noise_blocks(noise: list) -> list[Block]:
    """The noise floor's table and, under it, why it parts from the verdicts where it does (nothing: no floor)."""
    return [noise_table(noise), *(Text(line) for line in noise_notes(noise))] if noise else []


def noise_table(noise: list) -> Table:
    """The baseline's between-run spread per judged cell, beside the limit the rule applies there."""
    table = Table(["metric", "cell", "baseline runs", "CV between runs", "within a run (SE)", "limit",
                   "runs per side the limit needs", "detectable at these runs", "best spend of machine time",
                   "the verdicts' CV"],
                  title="noise floor (the baseline against itself)")
    parted = 0
    for n in noise:
        where = "" if n.machines < 2 else \
            f" (across {n.machines} machines: an upper bound)" if n.across_machines else f" (within {n.machines} machines)"
        cv = "-" if n.cv_pct is None else f"{n.cv_pct:.1f}%{where}"
        needs = "-" if n.cv_pct is None else (str(n.runs_needed) if n.runs_needed else "more than 200")
        detectable, within = n.detectable_pct, n.within_run_pct
        css: Style = "" if n.resolvable is None else ("" if n.resolvable else "warn")
        why = n.disagreement()
        if why:
            parted += 1
        verdicts = "-" if n.verdict_cv_pct is None else f"{n.verdict_cv_pct:.1f}%" + (f" ({parted})" if why else "")
        table.add([n.metric, n.cell_id, n.runs, cv, "-" if within is None else f"{within:.1f}%", f"{n.limit_pct:g}%",
                   needs, "-" if detectable is None else f"{detectable:.1f}%",
                   "-" if n.allocation is None else n.allocation.describe(), verdicts], "" if why else css)
    return table


@dataclass
class DryRunView(Renderable):
    """Every preflight step, compose file and command line a sweep would run; given the plan (sweeps.DryRunPlan),
    what the journal holds already and roughly how long the rest takes."""

    entries: list  # of sweep.DryRunEntry
    plan_id: str
    planned: DryRunPlan | None = None

    def blocks(self) -> list[Block]:
        blocks: list[Block] = []
        for item in self.entries:
            lines = [f"  preflight: {step}" for step in item.preflight]
            if item.compose_yaml is not None:
                lines.append("  compose.yaml:")
                lines.append("    " + item.compose_yaml.rstrip().replace("\n", "\n    "))
                for command in item.compose_commands:
                    lines.append(f"  # then wait until {command[1]} is healthy" if command[0].startswith("<")
                                 else "  $ " + shlex.join(command))
            else:
                lines.append("  $ " + shlex.join(item.argv))
                lines += ["  $ " + shlex.join(command) for command in item.more_commands or []]
            if item.parameters:
                lines.append("  notebook parameters: " + ", ".join(item.parameters))
            held = "" if item.recorded is None or self.planned is None else \
                f": {item.recorded} of {self.planned.repeats} runs recorded"
            blocks += [Text(f"{item.entry.name} ({item.entry.candidate.id}){held}", "heading"),
                       Text("\n".join(lines), pre=True)]
        blocks.append(Text(f"{len(self.entries)} candidates, plan {self.plan_id}; nothing was started (--dry-run)"))
        plan = self.planned
        if plan is not None and plan.entries and plan.entries[0].recorded is not None:
            left, run_s = plan.to_run, plan.run_s
            when = f", about {left * run_s / 60:.0f} min at the {run_s:.0f} s a run of this plan took here" \
                if run_s and left else ("" if not left else ", time unknown (no run of this plan recorded yet)")
            blocks.append(Text(f"to run: {left} runs{when}; --until-decided may add more where verdicts stay open"))
        return blocks


@dataclass
class MemoryView(Renderable):
    """A model's memory arithmetic and what fits on a host, replicas versus wider TP."""

    shape: ModelShape
    fits: list
    gpu_gib: float
    gpus: int
    kv_dtype: str

    def blocks(self) -> list[Block]:
        s = self.shape
        state = f"; {s.recurrent_state_bytes / 2**20:.1f} MiB recurrent state per request, split across GPUs" \
            if s.recurrent_state_bytes else ""
        blocks: list[Block] = [Text(
            f"{s.name}: {s.layers} layers ({s.attention_layers} with a KV cache), weights {s.weight_bytes / 2**30:.2f} "
            f"GiB; KV: {s.describe_kv(self.kv_dtype)}{state}", "heading")]
        if self.fits:
            blocks.append(fit_table(self.fits, self.gpu_gib, self.kv_dtype))
        else:
            blocks.append(Text(f"the weights do not fit in {self.gpus} x {self.gpu_gib:g} GiB at any tensor "
                               "parallel width", "invalid"))
        return blocks


def size_model(model: str, *, gpu_gib: float = 141.0, gpus: int = 8, context_length: int = 32768,
               kv_dtype: str = "f16", weights_gib: float | None = None, **options) -> MemoryView:
    """The memory arithmetic of `model` (a GGUF file, tiny:/random:NAME, or a config.json or its folder)."""
    from pathlib import Path

    from ..config.errors import InputError
    from ..engines.sizing import ModelShape, replica_table
    from ..models.random_models import generated_path

    try:
        path = generated_path(model) or Path(model)
    except KeyError as error:
        raise InputError(f"model: {error.args[0]}") from None
    if not Path(path).exists():
        raise InputError(f"model: {path} not found (write tiny and random models with `servebook models`)")
    try:
        shape = ModelShape.from_file(path)
        if weights_gib is not None:
            shape = shape.with_weights(int(weights_gib * 2**30), f"{weights_gib:g} GiB as given")
        fits = replica_table(shape, gpu_gib=gpu_gib, context_length=context_length, kv_dtype=kv_dtype, gpus=gpus,
                             **options)
    except (KeyError, ValueError, TypeError) as error:
        raise InputError(f"model {model}: cannot read its shape ({error})") from None
    return MemoryView(shape, fits, gpu_gib, gpus, kv_dtype)
