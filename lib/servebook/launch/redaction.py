"""Keeping secrets (API keys, tokens) out of everything servebook writes."""

from __future__ import annotations

from ..config.secrets import REDACTED, SECRET_FLAGS, looks_secret


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: (REDACTED if looks_secret(k) else v) for k, v in env.items()}


def redact_argv(argv: list[str]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag in SECRET_FLAGS:
            if eq:
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return out
