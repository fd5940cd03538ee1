"""Reading candidates, plans and studies from YAML, and `--set KEY=VALUE` overrides.

Every loader turns a problem into one InputError naming the file and the field, never a
traceback: a misspelled field is an error, not a silently ignored setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ..util.paths import locate, not_found
from .candidate import Candidate, set_dotted
from .errors import InputError, format_validation_error
from .knobs import knobs_model
from .plan import Plan
from .study import Study

Model = TypeVar("Model", bound=BaseModel)


def read_yaml(path: str | Path, what: str = "file") -> Any:
    """The parsed YAML of a user's file, or one InputError that names the file."""
    given, path = path, locate(path, what)
    if not path.is_file():
        raise InputError(not_found(given, what))
    try:
        return yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise InputError(f"{path}: not valid YAML: {error}") from None


def validate(model_cls: type[Model], data: Any, source: str) -> Model:
    """`model_cls` from parsed data, with pydantic's errors turned into one InputError."""
    try:
        return model_cls.model_validate(data)
    except ValidationError as error:
        raise InputError(format_validation_error(error, source, model_cls)) from None


def load_yaml_model(path: str | Path, model_cls: type[Model]) -> Model:
    return validate(model_cls, read_yaml(path), str(path))


def load_candidate(path: str | Path) -> Candidate:
    return load_yaml_model(path, Candidate)


def load_plan(path: str | Path | None) -> Plan:
    return Plan() if path is None else load_yaml_model(path, Plan)


def parse_overrides(items: list[str], source: str = "--set") -> dict[str, Any]:
    """`["knobs.chunk_size=256"]` -> `{"knobs.chunk_size": 256}`; values are parsed as YAML."""
    overrides: dict[str, Any] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise InputError(f"{source} {item!r}: expected KEY=VALUE, for example knobs.chunk_size=256")
        try:
            overrides[key.strip()] = yaml.safe_load(raw)
        except yaml.YAMLError as error:
            raise InputError(f"{source} {item!r}: the value is not valid YAML: {error}") from None
    return overrides


def with_overrides(candidate: Candidate, overrides: dict[str, Any], source: str = "--set") -> Candidate:
    try:
        return candidate.with_overrides(overrides)
    except ValidationError as error:
        raise InputError(format_validation_error(error, source, Candidate)) from None


def _override_keys(data: dict) -> list[tuple[str, str]]:
    """(where, dotted key) of every axis and variant override, for the path check below."""
    axes = data.get("axes") or {}
    if not isinstance(axes, dict):
        raise InputError("axes: a mapping with grid and/or zip, each mapping a dotted field to a list of values")
    keys = []
    for kind in ("grid", "zip"):
        section = axes.get(kind) or {}
        if not isinstance(section, dict):
            raise InputError(f"axes.{kind}: a mapping from a dotted field (knobs.chunk_size) to a list of values")
        keys += [(f"axes.{kind}.{k}", str(k)) for k in section]
    variants = data.get("variants") or []
    if not isinstance(variants, list):
        raise InputError("variants: a list of {name, set: {dotted.field: value}}")
    for i, variant in enumerate(variants):
        if not isinstance(variant, dict):
            raise InputError(f"variants[{i}]: a mapping with name and set")
        overrides = variant.get("set") or {}
        if not isinstance(overrides, dict):
            raise InputError(f"variants[{i}].set: a mapping from a dotted field to a value")
        keys += [(f"variants[{i}].set.{k}", str(k)) for k in overrides]
    search = data.get("search")
    if isinstance(search, dict) and isinstance(search.get("space"), dict):
        keys += [(f"search.space.{k}", str(k)) for k in search["space"]]
    return keys


def _check_override_paths(data: dict, source: str) -> None:
    """Walk each axis and variant key through the candidate model, so an unknown field is reported
    under the axis that names it rather than under some expanded candidate."""
    base = data.get("base")
    engine = base.get("engine", "llamacpp") if isinstance(base, dict) else None
    for where, dotted in _override_keys(data):
        parts = dotted.split(".")
        model: Any = Candidate
        for depth, part in enumerate(parts):
            if model is Candidate and part == "knobs":
                model = knobs_model(str(engine))  # the base engine's own knobs; a field of another engine's is unknown
                continue
            fields = getattr(model, "model_fields", None)
            if fields is None:
                break
            if part not in fields:
                from ..util.suggest import close_names

                close = close_names(part, fields)
                meant = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
                raise InputError(f"{source}: {where}: unknown field {'.'.join(parts[:depth + 1])!r}{meant} "
                                 f"(known here: {', '.join(sorted(fields))})")
            annotation = fields[part].annotation
            model = next((a for a in getattr(annotation, "__args__", (annotation,))
                          if isinstance(a, type) and issubclass(a, BaseModel)), None)
            if model is None:
                break


def study_from_data(data: Any, source: str) -> Study:
    """A study from parsed YAML, checked whole (fields, override paths, every expanded candidate, baseline,
    rule selectors) or one InputError naming `source` and the field."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: a study is a mapping with name, base, axes, variants, plan, verdict")
    try:
        _check_override_paths(data, source)
    except InputError as error:
        message = str(error)
        raise InputError(message if message.startswith(source) else f"{source}: {message}") from None
    study = validate(Study, data, source)
    try:
        study.expand()
    except InputError as error:
        raise InputError(f"{source}: {error}") from None
    return study


def load_study(path: str | Path, base_overrides: dict[str, Any] | None = None) -> Study:
    """A study file; `base_overrides` (dotted keys, as `--set` gives them) change its base candidate, and so every
    candidate of the study: a CI job pins the engine release under test with `--set pins.engine_version=...`."""
    data = read_yaml(path, "study file")
    if base_overrides:
        if not isinstance(data, dict) or not isinstance(data.get("base"), dict):
            raise InputError(f"{path}: --set changes the study's base, and this study has none")
        data = {**data, "base": set_dotted(data["base"], base_overrides)}
    return study_from_data(data, str(path) + (" with --set" if base_overrides else ""))
