"""Synthetic journals for tests and benchmarks of everything downstream of measuring.

They are written through the same `RunWriter` as real runs, so they follow the journal contract,
but their numbers are made up: never publish them. Every manifest says `"synthetic": true`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..config.candidate import Candidate
from ..config.plan import Plan
from .manifest import Manifest
from .store import Journal, RunRecord

CONCURRENCY = (1, 2, 4, 8)
PROMPTS = (512, 2048)


def _cells(rng: np.random.Generator, speed: float, invalid: str | None) -> list[dict]:
    cells = []
    for category in ("prose", "code"):
        for c in CONCURRENCY:
            per_request = speed * 300 / (1 + 0.25 * (c - 1)) * rng.uniform(0.97, 1.03)
            cells.append({
                "cell_id": f"decode-{category}-c{c}", "kind": "decode", "category": category, "concurrency": c,
                "target_prompt_tokens": None, "output_tokens": 64, "requests": 2 * c, "errors": 0,
                "prompt_tokens": 150 * 2 * c, "cached_tokens": 50 * 2 * c, "completion_tokens": 128 * c,
                "wall_s": 64 / per_request * 2, "aggregate_tok_s": per_request * c * 0.95,
                "per_request_tok_s": per_request, "ttft_s": 0.02 * c, "ttft_p90_s": 0.03 * c,
                "prefill_tok_s": None, "draft_acceptance": None, "reconciliation": "ok",
                "reconciliation_message": "prompt tokens = server; generated tokens = server",
                "valid": True, "invalid_codes": "", "invalid_reasons": "",
            })
    for n in PROMPTS:
        rate = speed * 15000 * rng.uniform(0.95, 1.05)
        cells.append({
            "cell_id": f"prefill-{n}", "kind": "prefill", "category": "prose", "concurrency": 1,
            "target_prompt_tokens": n, "output_tokens": 1, "requests": 2, "errors": 0, "prompt_tokens": 2 * n,
            "cached_tokens": 0, "completion_tokens": 2, "wall_s": 2 * n / rate, "aggregate_tok_s": None,
            "per_request_tok_s": None, "ttft_s": n / rate, "ttft_p90_s": n / rate, "prefill_tok_s": rate,
            "draft_acceptance": None, "reconciliation": "ok", "reconciliation_message": "prompt tokens = server",
            "valid": True, "invalid_codes": "", "invalid_reasons": "",
        })
    if invalid:
        cells[0].update(valid=False, invalid_codes="counters_disagree", invalid_reasons=invalid, reconciliation="mismatch",
                        reconciliation_message=invalid)
    return cells


def _requests(rng: np.random.Generator, rows: int) -> pd.DataFrame:
    t_send = np.sort(rng.uniform(0, 60, rows))
    ttft = rng.uniform(0.01, 0.2, rows)
    span = rng.uniform(0.1, 0.5, rows)
    return pd.DataFrame({
        "request_id": [f"r{i}" for i in range(rows)],
        "cell_id": [f"decode-prose-c{CONCURRENCY[i % 4]}" for i in range(rows)],
        "concurrency": [CONCURRENCY[i % 4] for i in range(rows)],
        "category": "prose", "expected_completion_tokens": 64,
        "t_send": t_send, "t_first": t_send + ttft, "t_last": t_send + ttft + span,
        "prompt_tokens": 150, "completion_tokens": 64, "cached_tokens": 50, "chunk_count": 66,
        "finish_reason": "length", "error": None,
    })


def write_synthetic_run(journal: Journal, *, index: int, study: str | None = "synthetic", status: str = "completed",
                        requests: int = 2000, invalid: str | None = None, log_line: str = "",
                        label: str | None = None, verdict: str | None = None, reasons: list[str] | None = None,
                        chunk_size: int | None = None, environment: dict | None = None,
                        started_at: str | None = None, speed: float | None = None,
                        plan: Plan | None = None) -> RunRecord:
    """One run; `status` is completed, failed, interrupted (its cells kept) or incomplete (no manifest).
    `environment` adds to the recorded environment (engine_version, machine_id, ...), `started_at` moves it in
    time, `speed` scales every figure; `plan` is the plan it names (its cells are the same whatever it says)."""
    rng = np.random.default_rng(index)
    label = label or f"candidate-{index % 10}"
    candidate = Candidate.model_validate({"name": label, "model": {"path": "tiny:target"},
                                          "knobs": {"chunk_size": chunk_size or 64 * (1 + index % 10),
                                                    "max_running_requests": 4}})
    plan = plan or Plan()
    run_id = f"20260101T{index // 3600 % 24:02d}{index // 60 % 60:02d}{index % 60:02d}Z-{candidate.id[:8]}-{index}"
    writer = journal.start_run(candidate.id, run_id)
    identity = {"candidate_id": candidate.id, "candidate_label": label, "candidate": candidate.model_dump(mode="json"),
                "plan_id": plan.id, "plan": plan.model_dump(mode="json"), "study": study, "study_entry": label,
                "synthetic": True}
    writer.write_json("launch.json", {**identity, "argv": ["llama-server", "-m", "tiny.gguf", "--port", "0"]})
    writer.engine_log.write_text("".join(f"0.00.{i:03d} I srv  synthetic log line {i}\n" for i in range(80))
                                 + (log_line + "\n" if log_line else ""))
    writer.write_table("requests", _requests(rng, requests))
    if status == "incomplete":
        return journal.run(writer.run_id)
    base = {**identity, "environment": {"host": "synthetic", "engine_version": "synthetic", **(environment or {})},
            "engine": {"argv": ["llama-server", "-m", "tiny.gguf", "--port", "0"]},
            "started_at": started_at or "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:01:00Z"}
    if status == "failed":
        writer.seal(Manifest.model_validate({
            **base, "status": "failed", "summary": None,
            "failure": {"stage": "launch", "cause": "bad_flag", "message": "error: invalid argument: --synthetic",
                        "exit_code": 1, "log_tail": "error: invalid argument: --synthetic"}}))
    else:
        cells = _cells(rng, speed or 1 + (index % 7) / 10, invalid)
        writer.write_table("cells", cells)
        stopped = {"stage": "measure", "cause": "interrupted", "message": "interrupted after some cells"}
        writer.seal(Manifest.model_validate({
            **base, "status": status, "failure": stopped if status == "interrupted" else None,
            "summary": {"cells": len(cells), "valid_cells": sum(c["valid"] for c in cells)}}))
    record = journal.run(writer.run_id)
    if verdict:
        record.append_verdict({"outcome": verdict, "reasons": reasons or [f"synthetic {verdict}"], "study": study,
                               "run_ids": [record.run_id],
                               "rules_hash": "synthetic", "rules": None, "baseline_run_id": None})
    return record


def write_modelled_run(journal: Journal, candidate: Candidate, plan: Plan, *, study: str, entry: str,
                       rng: np.random.Generator, launch_cv: float = 0.03, cell_cv: float = 0.01) -> RunRecord:
    """A completed run whose decode figures are the simulator's timing model for `candidate` (its truth, see
    simulator/truth.py) times a log-normal launch-to-launch draw shared by every cell and a smaller one per
    cell: what a search or a sweep would record if launches cost nothing. Synthetic: never publish it."""
    from ..simulator.truth import timing_for

    timing = timing_for(candidate)
    launch = rng.lognormal(0.0, launch_cv)
    decode = plan.decode
    cells = []
    for category in decode.categories if decode else []:
        for c in decode.concurrency if decode else []:
            value = timing.decode_tok_s(c) * launch * rng.lognormal(0.0, cell_cv)
            output = decode.output_tokens if decode else 64
            ttft = timing.step_seconds(min(c, timing.slots)) * max(1.0, c / timing.slots)
            cells.append({"cell_id": f"decode-{category}-c{c}", "kind": "decode", "category": category,
                          "concurrency": c, "target_prompt_tokens": None, "output_tokens": output, "requests": c,
                          "errors": 0, "prompt_tokens": 150 * c, "cached_tokens": 0, "completion_tokens": output * c,
                          "wall_s": output * c / value, "aggregate_tok_s": value,
                          "per_request_tok_s": value / min(c, timing.slots), "ttft_s": ttft, "ttft_p90_s": ttft,
                          "prefill_tok_s": None, "draft_acceptance": timing.acceptance if timing.draft_tokens else None,
                          "reconciliation": "ok", "reconciliation_message": "modelled, not measured", "valid": True,
                          "invalid_codes": "", "invalid_reasons": ""})
    writer = journal.start_run(candidate.id)
    writer.write_table("cells", pd.DataFrame(cells))
    writer.seal(Manifest.model_validate({
        "status": "completed", "candidate_id": candidate.id, "candidate_label": entry,
        "candidate": candidate.model_dump(mode="json"), "plan_id": plan.id, "plan": plan.model_dump(mode="json"),
        "study": study, "study_entry": entry, "synthetic": True,
        "environment": {"host": "modelled", "engine_version": "sim-timing-model"},
        "summary": {"cells": len(cells), "valid_cells": len(cells)}}))
    return journal.run(writer.run_id)


def write_capacity_run(journal: Journal, *, label: str, capacity_rps: float | None, study: str = "synthetic-capacity",
                       low: float | None = None, high: float | None = None, index: int = 0,
                       slo: dict | None = None, launch: dict | None = None) -> RunRecord:
    """A completed run of a capacity search (made up): two probes as open-loop cells and the capacity row, under
    `slo` (the plan's objectives, default TTFT <= 1 s and TPOT <= 100 ms for 90% of requests); `launch` is the
    candidate's (replicas, a simulator)."""
    candidate = Candidate.model_validate({"name": label, "model": {"path": "tiny:target"},
                                          "knobs": {"max_running_requests": 1 + index % 4}, "launch": launch or {}})
    plan = Plan.model_validate({"decode": None, "prefill": None, "load": {}, "capacity": {},
                                "slo": slo or {"ttft_s": 1.0, "tpot_s": 0.1, "attainment": 0.9}})
    common = {"category": "prose", "reconciliation": "ok", "reconciliation_message": "synthetic", "valid": True,
              "invalid_codes": "", "invalid_reasons": "", "errors": 0, "prompt_tokens": 2560,
              "cached_tokens": 0, "completion_tokens": 640}
    held = capacity_rps or 1.0
    cells = [{**common, "cell_id": f"capacity-{rate:.4g}rps", "kind": "load", "concurrency": 0, "requests": 40,
              "offered_rps": rate, "achieved_rps": rate * 0.98, "slo_attainment": share, "slo_attainment_low":
              share - 0.05, "slo_attainment_high": min(1.0, share + 0.05), "goodput_rps": rate * share,
              "slo_met": share >= 0.9} for rate, share in ((held / 2, 1.0), (held * 2, 0.3))]
    cells.append({**common, "cell_id": "capacity", "kind": "capacity", "concurrency": 0, "requests": 80,
                  "capacity_rps": capacity_rps, "capacity_low_rps": low, "capacity_high_rps": high,
                  "capacity_cliff": False, "capacity_probes": 2, "capacity_client_limited": False})
    writer = journal.start_run(candidate.id, f"20260102T0000{index:02d}Z-{candidate.id[:8]}")
    writer.write_table("cells", pd.DataFrame(cells))
    writer.seal(Manifest.model_validate({
        "status": "completed", "candidate_id": candidate.id, "candidate_label": label,
        "candidate": candidate.model_dump(mode="json"), "plan_id": plan.id, "plan": plan.model_dump(mode="json"),
        "study": study, "study_entry": label, "synthetic": True, "environment": {"host": "synthetic"},
        "summary": {"cells": len(cells), "valid_cells": len(cells)}}))
    return journal.run(writer.run_id)
