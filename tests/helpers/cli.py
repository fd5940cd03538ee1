"""The CLI as a user runs it: a separate process, plain progress lines, from the repository root."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVEBOOK = [sys.executable, "-m", "servebook.cli"]
#: what a terminal would set and a pipe does not (a width), left out by `cli_env(columns=None)`
_WIDTH_VARIABLES = ("COLUMNS", "LINES", "TERMINAL_WIDTH")


def cli_env(columns: int | None = 160, **extra: str) -> dict[str, str]:
    """The environment: progress as plain log lines, output `columns` wide (None: no width at all, as in a pipe),
    and `extra` variables on top."""
    env = {k: v for k, v in os.environ.items() if columns is not None or k not in _WIDTH_VARIABLES}
    env["SERVEBOOK_PLAIN_PROGRESS"] = "1"
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return {**env, **extra}


def servebook(*args, check: bool = True, code: int = 0, env: dict[str, str] | None = None, timeout: float = 300,
              no_traceback: bool = False, **kwargs) -> subprocess.CompletedProcess:
    """`servebook ARGS...`; with `check`, an exit status other than `code` fails the test with the output.
    `no_traceback`: a traceback on stderr fails it too, whatever the status."""
    result = subprocess.run([*SERVEBOOK, *map(str, args)], capture_output=True, text=True,
                            env=cli_env() if env is None else env, cwd=REPO, timeout=timeout, **kwargs)
    if check and result.returncode != code:
        raise AssertionError(f"servebook {args} exited {result.returncode}\n{result.stdout}\n{result.stderr}")
    if no_traceback:
        assert "Traceback" not in result.stderr, result.stderr
    return result
