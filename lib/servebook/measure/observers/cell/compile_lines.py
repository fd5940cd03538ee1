"""Compile lines: what the engine logged that matches its adapter's compile pattern while a cell was measured. A
compilation inside the measured interval makes the cell invalid (measure.validity: `compilation`), since its
figures then include the compiler's time, not the candidate's."""

from __future__ import annotations

from typing import Any

from .base import Watched, register_observer


class CompileLines:
    columns: tuple[str, ...] = ()

    def __init__(self, watched: Watched):
        self.pattern = watched.endpoint.adapter.compile_pattern
        self.path = watched.endpoint.engine_log
        self.offset = 0
        self.lines: list[str] = []

    def _size(self) -> int:
        try:
            return self.path.stat().st_size if self.path else 0
        except OSError:
            return 0

    async def start(self) -> None:
        self.offset = self._size()

    async def stop(self) -> None:
        if self.pattern is None or self.path is None:
            return
        try:
            with open(self.path, "rb") as log:
                log.seek(self.offset)
                text = log.read().decode("utf-8", "replace")
        except OSError:
            return
        self.lines = [line.strip() for line in text.splitlines() if self.pattern.search(line)]

    def figures(self) -> dict[str, Any]:
        return {}

    def rows(self, cell_id: str) -> list[dict[str, Any]]:
        return []

    def evidence(self) -> dict[str, Any]:
        return {"compilations": self.lines}


register_observer("compile_lines", CompileLines)
