"""The engine command line servebook would give every SGLang and vLLM candidate of every study, as JSON
{engine: {study: {candidate: argv}}}, for engine_contract.py to parse with the engines' real parsers.

    .venv/bin/python scripts/dry_run_lines.py data/studies/*.yaml > lines.json
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# Generated models (random:1b) resolve under the cache: one fixed root, so a recorded line does not depend on the
# machine it was recorded on.
os.environ["SERVEBOOK_CACHE"] = "/servebook-cache"

from servebook.config.loading import load_study  # noqa: E402
from servebook.engines import get_engine  # noqa: E402
from servebook.models.random_models import model_file_name  # noqa: E402


def command_lines(paths: list[str]) -> dict:
    out: dict = {}
    for path in paths:
        study = load_study(Path(path))
        for entry in study.expand():
            candidate = entry.candidate
            # A simulator study's line is read by servebook's simulator, never by the engine: not recorded.
            if candidate.engine not in ("sglang", "vllm") or candidate.launch.simulator:
                continue
            adapter = get_engine(candidate.engine)
            model = model_file_name(candidate.model.path or candidate.model.id, adapter.model_format) or ""
            argv = adapter.argv(candidate, port=30000, model_path=model,
                                draft_path=model_file_name(candidate.knobs.drafter.model, adapter.model_format))
            out.setdefault(candidate.engine, {}).setdefault(study.name, {})[entry.name] = argv
    return out


if __name__ == "__main__":
    json.dump(command_lines(sys.argv[1:]), sys.stdout, indent=1)
