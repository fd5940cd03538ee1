"""Dry runs: every step and command of a study, without building, generating, probing or launching anything."""

from __future__ import annotations

from dataclasses import dataclass

from ..config.secrets import redact_argv
from ..config.study import Study, StudyEntry
from ..engines import get_engine


@dataclass
class DryRunEntry:
    entry: StudyEntry
    preflight: list[str]
    argv: list[str]
    compose_yaml: str | None = None
    compose_commands: list[list[str]] | None = None


def dry_run(study: Study) -> list[DryRunEntry]:
    """The same lines whatever this host has built or cached: argv is pure, and the engine binary is named, not
    looked up (a CUDA build of llama.cpp adds -ngl 999 when nothing else sets gpu_layers)."""
    from ..engines.random_models import model_file_name
    from ..launch.compose import render
    from ..launch.preflight import describe

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
        argv = adapter.argv(candidate, port=candidate.launch.port or 0, model_path=model, draft_path=draft)
        argv = ["<port: free>" if a == "0" and i and argv[i - 1] == "--port" else a for i, a in enumerate(argv)]
        out.append(DryRunEntry(entry, steps, redact_argv(argv)))
    return out
