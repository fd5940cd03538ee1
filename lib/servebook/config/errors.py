"""Bad user input, reported once with the file, the field and the fix."""

from __future__ import annotations

from pydantic import ValidationError


class InputError(ValueError):
    """Bad user input; the message names the file, the field and the fix."""


def format_validation_error(error: ValidationError, source: str) -> str:
    lines = [f"{source}: {error.error_count()} problem(s)"]
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "(top level)"
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown field (check the spelling; extra fields are not ignored)"
        lines.append(f"  {where}: {message}")
    return "\n".join(lines)
