"""What the site's pages show of runs: one JSON summary per run, and the tables built from summaries.

A run is summarised once into the build cache (keyed by its files); pages are rendered from
summaries only, so an unchanged run is never read again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable

import pandas as pd
import yaml

from ...config.metrics import measured_by
from ...config.secrets import Scrubber, redact_argv
from ...journal.index import index_row
from ...journal.store import RunRecord
from ...util.render import Row, Table
from ..comparison import unjudged_reasons
from ..figures import chunk_gap_histogram_data, figure_specs, mean_gap_histogram, mean_turns, run_context, turn_ttft_data
from ..kinds import DECODE_DEFINITIONS, GAP_NOTE, PREFILL_DEFINITIONS, PRESENT, session_view_kinds, turn_chart_kinds
from ..load_figures import gauge_data, probe_gap_data
from ..load_tables import (
    CAPACITY_DEFINITIONS,
    LATENCY_DEFINITIONS,
    capacity_estimates,
    capacity_table,
    capacity_text,
    latency_table,
    load_table,
    throughput_table,
)
from ..replica_tables import REPLICA_DEFINITIONS, replica_table
from ..scaling import ScalingPoint, scaling_spec
from ..sessions import newest_sessions, session_view_data
from ..tables import VERDICT_MODEL, estimate_tables, fmt, number, run_tables, section_definitions
from ..under_load import UNDER_LOAD_DEFINITIONS, under_load_tables
from .latency_cache import LatencyCache
from .summary import RunSummary, key_variable

LOG_LINES = 60


def page_slug(name: str) -> str:
    """A study or candidate name as the file name of its page."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "study"


# libyaml when present: the candidate on every run page is dumped with it (the pure-Python dumper took 3 ms a run)
_YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def candidate_yaml(candidate: dict | None) -> str:
    """A run's candidate as its page shows it; a candidate's repeats share theirs (its representer took 0.6 ms)."""
    return _yaml_of(json.dumps(candidate)) if candidate else "-"


@functools.lru_cache(maxsize=256)
def _yaml_of(candidate: str) -> str:
    return yaml.dump(json.loads(candidate), Dumper=_YAML_DUMPER, sort_keys=False)


def content_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_fingerprint(directory: Path) -> str:
    """Changes whenever anything the site shows of this run changes (files added, sealed, judged). Listed with
    os.scandir, whose entries carry their type: pathlib's rglob and stat were half of a build that changed nothing."""
    parts: list[tuple[str, int, int]] = []
    folders = [(str(directory), "")]
    while folders:
        folder, prefix = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append((entry.path, f"{prefix}{entry.name}/"))
                elif not entry.name.startswith(".") and entry.is_file():
                    stat = entry.stat()
                    parts.append((prefix + entry.name, stat.st_size, stat.st_mtime_ns))
    return content_hash(sorted(parts))


def summarize_run(record: RunRecord, figures: Path | None = None, scrubber: Scrubber | None = None,
                  cells: Any = None) -> RunSummary:
    """Everything the pages need from one run, kept by the build (summary_cache.py); `figures` and `cells` as
    latency_cache.py says; `scrubber`: secrets to hide besides the run's own key."""
    identity, manifest = record.identity, record.manifest
    scrubber = (scrubber or Scrubber.from_environment()).adding(key_variable(identity.candidate))
    cell_rows = LatencyCache(figures).rows(record, cells) if record.status == "completed" else []
    latest = verdicts[-1] if (verdicts := record.verdicts()) else {}
    decode = [c for c in cell_rows if c.get("kind") == measured_by("aggregate_tok_s") and c.get("valid")]
    prefill = [c for c in cell_rows if c.get("kind") == measured_by("prefill_tok_s") and c.get("valid")]
    top_c = max((c["concurrency"] for c in decode), default=None)
    top_p = max((int(c["target_prompt_tokens"]) for c in prefill), default=None)
    # Scrubbed again here, so a journal written before scrubbing publishes no key on its pages.
    sealed = scrubber.json(manifest.model_dump(mode="json", by_alias=True)) if manifest is not None else {}
    launch_argv = redact_argv(record.launch_argv)
    return RunSummary(
        run_id=record.run_id,
        status=record.status,
        label=record.candidate_label,
        candidate_id=identity.candidate_id,
        candidate=identity.candidate,
        plan_id=identity.plan_id,
        study=identity.study,
        engine=identity.engine_kind,
        simulated=identity.simulated,
        gates=(sealed.get("summary") or {}).get("gates") or {},
        started_at=identity.started_at,
        finished_at=sealed.get("finished_at"),
        sealed_at=sealed.get("sealed_at"),
        failure=sealed.get("failure"),
        problem=record.problem,
        summary=sealed.get("summary"),
        environment=sealed.get("environment") or {},
        verification=(sealed.get("engine") or {}).get("verification"),
        memory=(sealed.get("engine") or {}).get("memory"),
        argv=(manifest.engine.argv if manifest is not None else []) or launch_argv,
        cells=cell_rows,
        verdicts=verdicts,
        verdict=latest.get("outcome"),
        reasons=latest.get("reasons") or [],
        method=latest.get("method"),
        rules=latest.get("rules"),
        rules_hash=latest.get("rules_hash"),
        baseline_run_id=latest.get("baseline_run_id"),
        decode_value=mean([c["aggregate_tok_s"] for c in decode if c["concurrency"] == top_c]),
        decode_at=top_c,
        prefill_value=mean([c["prefill_tok_s"] for c in prefill if c["target_prompt_tokens"] == top_p]),
        prefill_at=top_p,
        **capacity_summary(cell_rows, run_context(record)),
        chunk_gaps=chunk_gap_histogram_data(record, cell_rows),
        probe_gaps=probe_gap_data(record, cell_rows), gauges=gauge_data(record),
        frontier=run_context(record),
        reuse_turns=turn_ttft_data(record) if any(c.get("kind") in turn_chart_kinds() for c in cell_rows) else [],
        agent_sessions=session_view_data(record) if any(c.get("kind") in session_view_kinds() for c in cell_rows)
        else {},
        log_tail=scrubber.text(record.log_tail(LOG_LINES)),
        files=sorted(p.name for p in record.dir.iterdir() if p.is_file() and not p.name.startswith(".")),
        index_row=index_row(record),  # its row of the journal's index, for history() without reading the index
        annotations=asdict(record.annotations),  # tags, notes, archived: added beside the sealed run
    )


def capacity_summary(cells: list[dict], context: dict) -> dict:
    """The run's capacity for listings: requests/s held (None where none was searched or none held) and the
    sentence with its interval and objectives."""
    found = [c for c in cells if c.get("kind") == measured_by("capacity_rps")]
    if not found:
        return {"capacity_value": None, "capacity_text": ""}
    cell = {**found[0], **context}
    return {"capacity_value": number(cell.get("capacity_rps")) if cell.get("valid") else None,
            "capacity_text": capacity_text(cell) + ("" if cell.get("valid") else f" (invalid: {cell['invalid_reasons']})")}


def mean(values: list) -> float | None:
    numbers = [v for v in (number(x) for x in values) if v is not None]
    return sum(numbers) / len(numbers) if numbers else None


def cells_frame(summaries: Iterable[RunSummary]) -> pd.DataFrame:
    rows = [dict(cell, candidate=s.label, run_id=s.run_id, order=i)
            for i, s in enumerate(summaries) for cell in s.cells]
    return pd.DataFrame(rows)


def cell_records(summaries: Iterable[RunSummary]) -> list[dict]:
    """Every cell of the runs as a plain dict labelled by candidate and carrying its run's objectives and GPUs
    (what tables and charts take)."""
    return [dict(cell, candidate=s.label, run_id=s.run_id, order=i, **(s.frontier or {}))
            for i, s in enumerate(summaries) for cell in s.cells]


def charts(summaries: list[RunSummary], prefix: str) -> list[dict]:
    cells = cell_records(summaries)
    if not cells:
        return []
    by_label: dict[str, list[RunSummary]] = {}
    for s in summaries:  # each candidate's every run, in one line per chart
        by_label.setdefault(s.label, []).append(s)
    specs = figure_specs(cells, {label: mean_gap_histogram(s.chunk_gaps for s in own) for label, own in by_label.items()},
                         {label: mean_turns(s.reuse_turns or [] for s in own) for label, own in by_label.items()},
                         {label: mean_gap_histogram(s.probe_gaps for s in own) for label, own in by_label.items()},
                         summaries[0].gauges if len(summaries) == 1 else None,  # one run's time axis
                         {label: newest_sessions(s.agent_sessions for s in own) for label, own in by_label.items()})
    return [{"id": f"{prefix}-chart-{i}", "figure": spec} for i, spec in enumerate(specs)]


def scaling_points(summaries: list[RunSummary]) -> list[ScalingPoint]:
    """Each completed run's figure at its replica count, where the runs differ in launch.replicas: capacity where
    every one measured it, else aggregate decode at the highest concurrency (one figure for the whole chart)."""
    done = [s for s in summaries if s.status == "completed"]
    counts = {int((s.candidate.get("launch") or {}).get("replicas") or 1) for s in done}
    if len(counts) < 2:
        return []
    capacity = all(s.capacity_value is not None for s in done)
    figure = "capacity (requests/s)" if capacity else "aggregate decode (tok/s)"
    values = [(s, s.capacity_value if capacity else s.decode_value) for s in done]
    return [ScalingPoint(int((s.candidate.get("launch") or {}).get("replicas") or 1), value, figure)
            for s, value in values if value is not None]


def study_charts(forest: dict, shown: list[RunSummary]) -> list[dict]:
    """A study page's charts: the verdicts' forest, scaling against replica count where replicas differ, then every
    kind's charts of the runs the verdicts compared."""
    points = scaling_points(shown)
    scaling = [{"id": "study-scaling", "figure": scaling_spec(points)}] if points else []
    return [{"id": "study-forest", "figure": forest}] + scaling + charts([s for s in shown if s.cells], "study")


def sections(summaries: list[RunSummary]) -> list[dict]:
    """The tables practitioners publish, per category and for cold prefill, with their definitions."""
    cells = cell_records(summaries)
    label = "candidate" if len(summaries) > 1 else None
    out = []
    for kind, entry in PRESENT.items():
        tables = run_tables(cells, entry.table, kind, label) if entry.table else []
        if tables and entry.section:
            out.append({"title": entry.section.title, "tables": tables,
                        "definitions": section_definitions(entry.section, cells, kind)})
    for title, made, definitions in (
            ("Capacity and open-loop load", [capacity_table(cells, label), load_table(cells, label)], CAPACITY_DEFINITIONS),
            ("Latency percentiles and throughput", [latency_table(cells, label), throughput_table(cells, label)],
             LATENCY_DEFINITIONS),
            ("Latency under load: stalls, probes and the engine's gauges", under_load_tables(cells, label),
             UNDER_LOAD_DEFINITIONS),
            ("Replicas: each one's share, hit rate, and the prefix cache kept", [replica_table(cells, label)],
             REPLICA_DEFINITIONS)):
        shown = [t for t in made if t is not None]
        if shown:
            out.append({"title": title, "tables": shown, "definitions": definitions})
    return out


def cells_detail(summary: RunSummary) -> Table:
    frame = Table(["cell", "requests", "errors", "prompt tokens", "cached", "generated", "steady tok/s",
                   "ramp up / down", "others' CPU", "GPU", "reconciliation", "valid"])
    for cell in summary.cells:
        power = cell.get("gpu_power_w")
        gpu = "not sampled" if power is None else (
            f"{power:.0f} W, {fmt(cell.get('joules_per_token'), '.3f')} J/token, {fmt(cell.get('tok_s_per_w'), '.2f')} "
            f"tok/s/W" + (f", throttled: {cell['gpu_throttle']}" if cell.get("gpu_throttle") else ""))
        ramp = "-" if cell.get("ramp_up_s") is None else f"{cell['ramp_up_s']:.2f} s / {cell['ramp_down_s']:.2f} s"
        foreign, seated, held = (cell.get(f"{k}_cpu_cores") for k in ("foreign", "seated", "contending"))
        # a resident round's other seats: the round's own load beside the foreign one, never in it (and how much of
        # it fell on the CPUs this engine is held to)
        seats = f"+ {seated:.2f} the round's other seats" if isinstance(seated, float) and math.isfinite(seated) else ""
        seats += f", {held:.2f} of it on this engine's CPUs" if seats and isinstance(held, float) and held > 0 else ""
        others = "not checked" if foreign is None else f"{foreign:.2f} cores" + (f" ({seats})" if seats else "")
        frame.rows.append(Row([cell["cell_id"], cell["requests"], cell["errors"], cell["prompt_tokens"],
                               cell["cached_tokens"], cell["completion_tokens"], fmt(cell.get("steady_tok_s")), ramp,
                               others, gpu,
                               f"{cell['reconciliation']}: {cell['reconciliation_message']}",
                               "yes" if cell["valid"] else f"no: {cell['invalid_reasons']}"],
                              "" if cell["valid"] else "invalid"))
    return frame


def environment_table(summary: RunSummary) -> Table:
    frame = Table(["", ""])
    for key, value in summary.environment.items():
        if isinstance(value, (dict, list)):
            value = json.dumps(value, sort_keys=True) if value else "-"
        frame.rows.append(Row([key, "-" if value is None else value]))
    return frame


def status_reason(s: RunSummary) -> list[str]:
    """As failure_reasons, from the summary the site cached (its failure as the manifest's JSON)."""
    return unjudged_reasons(s.status, s.problem, f"{s.failure['cause']}: {s.failure['message']}" if s.failure else None)




ESTIMATE_NOTE = ("With repeats, each figure is the geometric mean of the candidate's runs with a 95% t interval of "
                 "their logs (so a rate or a time never shows an interval below zero), or the range of its runs "
                 "where fewer than 3 ran. A change vs the baseline comes from one model of the cell over every "
                 "candidate of the study (log scale, rounds and machines as blocks, variance pooled and moderated per "
                 "candidate), shown as its two one-sided 95% bounds: accepted when every judged cell's bound is within "
                 "the limit, rejected when Holm's procedure across the cells finds one beyond it. Runs are the unit: "
                 "requests inside a run are not independent evidence.")


def judged_runs(runs: list[RunSummary]) -> dict[str, list[RunSummary]]:
    """label -> the runs its latest verdict compared (oldest first), else its newest run alone."""
    by_id = {s.run_id: s for s in runs}
    out: dict[str, list[RunSummary]] = {}
    for s in runs:  # run ids sort by time
        out.setdefault(s.label, []).append(s)
    for label, group in out.items():
        judged = next((r for r in reversed(group) if r.verdicts), None)
        ids = (judged.verdicts[-1].get("run_ids") or [judged.run_id]) if judged else [group[-1].run_id]
        out[label] = [by_id[i] for i in ids if i in by_id] or [group[-1]]
    return out


def comparisons_of(chosen: list[RunSummary]) -> list[dict]:
    """Every typed comparison of the candidates' latest verdicts, labelled by candidate."""
    out = []
    for s in chosen:
        event = s.verdicts[-1] if s.verdicts else {}
        for c in event.get("comparisons") or []:
            if "decision" in c:  # events written before intervals existed carry no interval
                out.append({**c, "candidate": s.label})
    return out


def noise_table_for(groups: dict[str, list[RunSummary]], rules: dict | None) -> tuple[Table | None, list[str]]:
    """The baseline's between-run spread at every judged cell, from the baseline runs the verdicts used, and why it
    parts from the verdicts where it does."""
    from ...config.rules import VerdictRules
    from ...verdicts import baseline_evidence, noise_rows
    from ...verdicts.noise import beside_verdicts, run_seconds
    from ..views import noise_notes, noise_table

    if not rules or rules.get("baseline") not in groups:
        return None, []
    verdict_rules = VerdictRules.model_validate(rules)
    events = [s.verdicts[-1] for group in groups.values() for s in group[-1:] if s.verdicts]
    dropped = {run for event in events for run in event.get("outlier_runs") or []}
    runs = [s for s in groups[rules["baseline"]] if s.cells and s.run_id not in dropped]
    rows = noise_rows(baseline_evidence([s.blocked_cells() for s in runs]), verdict_rules,
                      run_seconds=[t for t in (run_seconds(s.started_at, s.finished_at) for s in runs)
                                   if t is not None])
    compared = [c for label, group in groups.items() if label != rules["baseline"]
                for event in [s.verdicts[-1] for s in group[-1:] if s.verdicts] for c in event.get("comparisons") or []]
    rows = beside_verdicts(rows, compared)
    return (noise_table(rows), noise_notes(rows)) if rows else (None, [])


#: what the study page prints under its figures
STUDY_DEFINITIONS = DECODE_DEFINITIONS + PREFILL_DEFINITIONS + [GAP_NOTE, ESTIMATE_NOTE] + CAPACITY_DEFINITIONS


def study_figures(shown: list[RunSummary]) -> dict:
    """The study page's tables over runs: each candidate's figures per cell, and its capacity with the objectives."""
    return {"estimates": estimate_tables(cells_frame([s for s in shown if s.cells])),
            "capacity": capacity_estimates(cell_records(shown)), "model": VERDICT_MODEL}
