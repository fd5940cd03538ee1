"""Sweeps: one papermill execution of notebooks/qualify.ipynb per candidate of a study.

The sweep validates the whole study before anything launches, skips candidates already
recorded under the same candidate and plan hashes, keeps going past failed candidates, and
judges every run of the study at the end. The executed notebook is stored in its run.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .candidate import InputError
from .engines import get_engine
from .journal import Journal, RunRecord
from .paths import repo_data_dir
from .progress import Reporter
from .redaction import redact_argv
from .study import Study, StudyEntry
from .verdict import Verdict, judge

QUALIFY_NOTEBOOK = repo_data_dir().parent / "notebooks" / "qualify.ipynb"


@dataclass
class SweepResult:
    name: str
    candidate_id: str
    run_id: str | None
    status: str  # completed | failed | incomplete | skipped | error
    seconds: float
    message: str = ""


@dataclass
class DryRunEntry:
    entry: StudyEntry
    preflight: list[str]
    argv: list[str]
    compose_yaml: str | None = None
    compose_commands: list[list[str]] | None = None


def dry_run(study: Study) -> list[DryRunEntry]:
    """Every step and command of the study, without building, generating, probing or launching anything."""
    from .compose import render
    from .preflight import describe

    out = []
    for entry in study.expand():
        candidate = entry.candidate
        adapter = get_engine(candidate.engine)
        model = _display_path(candidate.model.path or candidate.model.id)
        draft = _display_path(candidate.knobs.drafter.model)
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
        argv = adapter.argv(candidate, port=candidate.launch.port or 0, model_path=model, draft_path=draft)
        argv = ["<port: free>" if a == "0" and i and argv[i - 1] == "--port" else a for i, a in enumerate(argv)]
        out.append(DryRunEntry(entry, steps, redact_argv(argv)))
    return out


def _display_path(value: str | None) -> str | None:
    """Where a tiny: model will live, without generating it."""
    from .preflight import TINY_PREFIX
    from .tiny_models import TINY_MODELS, tiny_model_path

    if value and value.startswith(TINY_PREFIX) and value[len(TINY_PREFIX):] in TINY_MODELS:
        return str(tiny_model_path(value[len(TINY_PREFIX):]))
    return value


def study_runs(study: Study, journal: Journal) -> list[tuple[StudyEntry, RunRecord | None]]:
    """The newest sealed run of every study candidate under the study's plan (None if never run)."""
    plan_id = study.plan.id
    return [(entry, journal.find(entry.candidate.id, plan_id)) for entry in study.expand()]


def judge_study(study: Study, journal: Journal, *, append: bool = True) -> list[tuple[StudyEntry, RunRecord | None, Verdict | None]]:
    """Judge the recorded runs under the study's current rules; append an event where it changed."""
    runs = study_runs(study, journal)
    rules = study.verdict
    baseline = next((record for entry, record in runs if entry.name == rules.baseline), None)
    if not any(entry.name == rules.baseline for entry, _ in runs):
        raise InputError(f"verdict.baseline: no candidate named {rules.baseline!r} in study {study.name} "
                         f"(names: {', '.join(e.name for e, _ in runs)})")
    baseline_cells = baseline.table("cells") if baseline is not None and baseline.status == "completed" else None
    baseline_ok = baseline_cells is not None and bool(baseline_cells["valid"].all())
    out = []
    for entry, record in runs:
        if record is None:
            out.append((entry, None, None))
            continue
        verdict = judge(record.manifest, record.table("cells"), baseline_cells if baseline_ok else None, rules,
                        is_baseline=entry.name == rules.baseline)
        event = verdict.to_event(study=study.name, candidate=entry.name, candidate_id=entry.candidate.id,
                                 rules_hash=rules.hash, rules=rules.model_dump(mode="json"),
                                 baseline_run_id=baseline.run_id if baseline else None)
        latest = record.latest_verdict
        unchanged = latest is not None and all(
            latest.get(k) == event[k] for k in ("outcome", "reasons", "rules_hash", "baseline_run_id"))
        if append and not unchanged:
            record.append_verdict(event)
        out.append((entry, record, verdict))
    return out


class _ProgressStream:
    """The kernel's stderr (where the run's progress lines go), passed on line by line."""

    def __init__(self, reporter: Reporter, prefix: str):
        self.reporter, self.prefix, self._pending = reporter, prefix, ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            if line.strip():
                self.reporter.log(f"{self.prefix}{line.rstrip()}")
        return len(text)

    def flush(self) -> None:
        if self._pending.strip():
            self.reporter.log(f"{self.prefix}{self._pending.rstrip()}")
        self._pending = ""


def sweep(
    study: Study,
    journal: Journal,
    *,
    reporter: Reporter | None = None,
    retry_failed: bool = False,
    kernel_name: str = "python3",
    start_timeout: int = 120,
    execution_timeout: int | None = 3600,
    notebook: Path = QUALIFY_NOTEBOOK,
) -> list[SweepResult]:
    import papermill

    reporter = reporter or Reporter()
    journal.ensure_writable()
    entries = study.expand()
    work = journal.root / ".sweeps" / study.name
    work.mkdir(parents=True, exist_ok=True)
    results: list[SweepResult] = []
    statuses = ("completed", "failed") if not retry_failed else ("completed",)

    with reporter.task(f"sweep {study.name}: {len(entries)} candidates", total=len(entries)) as task:
        for entry in entries:
            started = time.monotonic()
            existing = journal.find(entry.candidate.id, study.plan.id, statuses=statuses)
            if existing is not None:
                results.append(SweepResult(entry.name, entry.candidate.id, existing.run_id, "skipped", 0.0,
                                           f"already recorded as {existing.status} in {existing.run_id}"))
                reporter.log(f"skip {entry.name}: {existing.status} run {existing.run_id} has the same candidate and plan")
                task.advance()
                continue
            run_id = journal.new_run_id(entry.candidate.id)
            output = work / f"{entry.name}.ipynb"
            parameters = {
                "candidate": entry.candidate.model_dump(mode="json"),
                "plan": study.plan.model_dump(mode="json"),
                "journal": str(journal.root.resolve()),
                "run_id": run_id,
                "study": study.name,
                "study_entry": entry.name,
            }
            reporter.log(f"candidate {entry.name} ({entry.candidate.id}) -> run {run_id}")
            progress = _ProgressStream(reporter, f"  [{entry.name}] ")
            message = ""
            try:
                papermill.execute_notebook(
                    str(notebook), str(output), parameters=parameters, kernel_name=kernel_name,
                    start_timeout=start_timeout, execution_timeout=execution_timeout,
                    progress_bar=False, log_output=False, stderr_file=progress, cwd=str(Path.cwd()),
                    # The kernel only listens on loopback; its warning about TCP transport is noise in CI logs.
                    extra_arguments=["--IPKernelApp.log_level=ERROR"],
                )
            except papermill.PapermillExecutionError as error:
                message = f"notebook failed in cell {error.exec_count}: {error.ename}: {error.evalue}"[:600]
            finally:
                progress.flush()
            record = _run_for(journal, run_id)
            if record is not None and output.is_file():
                shutil.copyfile(output, record.dir / "notebook.ipynb")
            status = record.status if record is not None else "error"
            if record is not None and record.status == "failed":
                failure = record.manifest.get("failure") or {}
                message = message or f"{failure.get('cause')}: {failure.get('message')}"
            results.append(SweepResult(entry.name, entry.candidate.id, record.run_id if record else None, status,
                                       time.monotonic() - started, message))
            reporter.log(f"candidate {entry.name}: {status}" + (f" ({message})" if message else ""))
            task.advance()
    journal.index()
    return results


def _run_for(journal: Journal, run_id: str) -> RunRecord | None:
    matches = [r for r in journal.run_ids() if r == run_id or r.startswith(run_id + ".")]
    return journal.run(matches[-1]) if matches else None
