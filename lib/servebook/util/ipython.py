"""servebook inside IPython (JupyterLab, papermill kernels)."""

from __future__ import annotations

from typing import Any

from .errors import RunInterrupted, ServebookError


def show_errors_briefly() -> None:
    """A ServebookError or an interrupted run shows as one line ("InputError: ..."), not a traceback. The cell
    still fails, so papermill and Run All stop there as before, and papermill's message names the error."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or getattr(shell, "_servebook_errors", False):
        return

    def brief(shell: Any, kind: type, error: BaseException, traceback: Any, tb_offset: int | None = None) -> None:
        shell.showtraceback((kind, error, traceback), exception_only=True)

    shell.set_custom_exc((ServebookError, RunInterrupted), brief)
    shell._servebook_errors = True
