"""Adding a covariate costs one observer module (measure/observers/cell/NAME.py, which registers itself) and its
test (issue 54). Here the module is written in this test and nothing else of servebook is changed: a run of the
simulated engine starts and stops it around every cell, its columns land in cells.parquet, its raw rows in
telemetry.parquet, and its evidence in the cell's validity."""

import asyncio
import re
import time
from types import SimpleNamespace

import pytest

from servebook.config import Plan
from servebook.journal import Journal
from servebook.measure.observers.cell import Watched, cell_observers, register_observer, unregister_observer
from servebook.run import run_candidate
from tests.helpers.candidates import QUIET, TOLERANT_CORES, simulated

pytestmark = pytest.mark.simulator
PLAN = Plan.model_validate({"decode": {"concurrency": [1, 2], "categories": ["prose"], "output_tokens": 8,
                                       "rounds": 1}, "prefill": None, "warmup_requests": 1,
                            "max_foreign_cpu_cores": TOLERANT_CORES})


# The observer's module: in the repository, measure/observers/cell/example.py, which ends with
# `register_observer("example", Example)`.
class Example:
    """How long each cell was watched, one raw row per cell, and (when told to) a compile line as evidence."""

    columns = ("example_watched_s", "example_engine")
    compiles = False

    def __init__(self, watched: Watched):
        self.engine = watched.endpoint.adapter.kind
        self.started: float | None = None
        self.seconds: float | None = None

    async def start(self) -> None:
        self.started = time.perf_counter()

    async def stop(self) -> None:
        assert self.started is not None, "stopped before it was started"
        self.seconds = time.perf_counter() - self.started

    def figures(self) -> dict:
        return {"example_watched_s": self.seconds, "example_engine": self.engine, "not_a_column": 1}

    def rows(self, cell_id: str) -> list[dict]:
        return [{"cell_id": cell_id, "source": "example", "watched_s": self.seconds}]

    def evidence(self) -> dict:
        return {"compilations": ["example: a graph compiled"]} if self.compiles else {}


@pytest.fixture
def example():
    register_observer("example", Example)
    yield Example
    unregister_observer("example")
    Example.compiles = False


def test_an_observer_is_its_module(example, tmp_path):
    assert example in cell_observers()
    record = run_candidate(simulated("vllm"), PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    cells = record.table("cells")
    assert list(cells.columns)[-2:] == ["example_watched_s", "example_engine"]  # its columns, in its order
    assert "not_a_column" not in cells.columns  # only what it declares
    assert (cells["example_watched_s"] > 0).all() and set(cells["example_engine"]) == {"vllm"}
    assert cells["valid"].all(), list(cells["invalid_reasons"])
    telemetry = record.table("telemetry")
    mine = telemetry[telemetry["source"] == "example"]
    assert sorted(mine["cell_id"]) == sorted(cells["cell_id"])  # one raw row per cell


def test_its_evidence_decides_the_cells_validity(example, tmp_path):
    example.compiles = True
    record = run_candidate(simulated("vllm"), PLAN, Journal(tmp_path), reporter=QUIET)
    cells = record.table("cells")
    assert not cells["valid"].any()
    assert all("compilation" in codes.split(",") for codes in cells["invalid_codes"])


def test_compile_lines_count_only_what_the_engine_logged_while_the_cell_was_watched(tmp_path):
    """The compile-line check, moved out of the loop into measure/observers/cell/compile_lines.py."""
    from servebook.measure.observers.cell.compile_lines import CompileLines

    log = tmp_path / "engine.log"
    log.write_text("Compiling a graph before the cell\n")
    endpoint = SimpleNamespace(adapter=SimpleNamespace(compile_pattern=re.compile("Compiling")), engine_log=log)
    observer = CompileLines(Watched(endpoint, PLAN))  # type: ignore[arg-type]
    assert CompileLines in cell_observers()

    async def cell():
        await observer.start()
        with log.open("a") as engine:
            engine.write("serving\nCompiling a graph during the cell\n")
        await observer.stop()

    asyncio.run(cell())
    assert observer.evidence() == {"compilations": ["Compiling a graph during the cell"]}
    assert observer.figures() == {} and observer.rows("c") == []
