"""Checks before anything launches: every one fails with a message that names the field and the fix."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from .candidate import Candidate, InputError
from .engine_install import find_llamacpp, install_llamacpp
from .launcher import PortInUse, ensure_port_free
from .progress import Reporter

TINY_PREFIX = "tiny:"


@dataclass(frozen=True)
class ResolvedPaths:
    engine_binary: str
    model_path: str
    draft_path: str | None


def resolve_model_path(value: str, field: str, reporter: Reporter) -> str:
    if value.startswith(TINY_PREFIX):
        from .tiny_models import TINY_MODELS, ensure_tiny_models

        name = value[len(TINY_PREFIX):]
        if name not in TINY_MODELS:
            raise InputError(f"{field}: unknown tiny model {name!r}; known: "
                             + ", ".join(f"tiny:{n}" for n in TINY_MODELS))
        return str(ensure_tiny_models(reporter=reporter)[name])
    path = Path(value).expanduser()
    if not path.is_file():
        raise InputError(f"{field}: model file not found: {path} "
                         "(give an existing GGUF file, or tiny:target for the built-in tiny model)")
    return str(path.resolve())


def preflight(candidate: Candidate, reporter: Reporter) -> ResolvedPaths:
    if candidate.engine != "llamacpp":
        raise InputError(f"engine: {candidate.engine} cannot be launched here yet")
    install = find_llamacpp()
    if install is None:
        reporter.log("llama-server is not built yet: building it once (cached for later runs)")
        install = install_llamacpp(reporter=reporter)
    if not shutil.os.access(install.server, shutil.os.X_OK):
        raise InputError(f"{install.server} is not executable; run `servebook engine install llamacpp --force`")
    if candidate.model.path is None:
        raise InputError("model.path: llama.cpp serves a local GGUF file; model.id alone cannot be launched")
    model_path = resolve_model_path(candidate.model.path, "model.path", reporter)
    draft = candidate.knobs.drafter.model
    draft_path = resolve_model_path(draft, "knobs.drafter.model", reporter) if draft else None
    if candidate.launch.port is not None:
        try:
            ensure_port_free(candidate.launch.host, candidate.launch.port)
        except PortInUse as error:
            raise InputError(str(error)) from None
    return ResolvedPaths(str(install.server), model_path, draft_path)
