"""Which names and flags carry secrets: one policy, used to refuse them in inputs and redact them in outputs."""

from __future__ import annotations

import re

REDACTED = "***"
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
SECRET_FLAGS = frozenset({"--api-key", "--admin-api-key", "--api-key-file", "--hf-token", "-hft", "--ssl-key-file"})


def looks_secret(name: str) -> bool:
    return bool(SECRET_NAME.search(name))
