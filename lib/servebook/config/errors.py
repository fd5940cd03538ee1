"""Bad user input, reported once with the file, the field and the fix."""

from __future__ import annotations

from pydantic import ValidationError

from ..util.errors import InputError

__all__ = ["InputError", "format_validation_error"]


def format_validation_error(error: ValidationError, source: str) -> str:
    lines = [f"{source}: {error.error_count()} problem(s)"]
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "(top level)"
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown field (check the spelling; extra fields are not ignored)"
        lines.append(f"  {where}: {message}")
    return "\n".join(lines)
