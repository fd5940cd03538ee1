"""Bad user input, reported once with the file, the field and the fix."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from ..util.errors import InputError
from ..util.suggest import close_names

__all__ = ["InputError", "format_validation_error"]


def format_validation_error(error: ValidationError, source: str, model: type[BaseModel] | None = None) -> str:
    """pydantic's errors as lines naming each field; with `model`, a misspelled field names the close one."""
    lines = [f"{source}: {error.error_count()} problem(s)"]
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "(top level)"
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            close = close_names(str(item["loc"][-1]), _fields_at(model, item["loc"][:-1])) if item["loc"] else []
            meant = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
            message = f"unknown field ({meant}check the spelling; extra fields are not ignored)"
        lines.append(f"  {where}: {message}")
    return "\n".join(lines)


def _fields_at(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> list[str]:
    """The field names of the model found at `loc` under `model` (list indices and union tags skipped)."""
    for part in loc:
        if model is None:
            return []
        field = model.model_fields.get(str(part)) if isinstance(part, str) else None
        if field is not None:
            model = _model_in(field.annotation)
    return list(model.model_fields) if model is not None else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for m in (_model_in(a) for a in get_args(annotation)) if m is not None), None)
