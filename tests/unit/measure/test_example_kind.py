"""Adding a cell kind costs three files (issue 31): a plan section (config/plan.py), the kind's module
(measure/kinds/NAME.py, which registers itself) and its present entry (present/kinds.py). Here all three are
written in this test, and nothing else of servebook is changed: the plan yields the kind's cells, the workloads
send them, the cell's row carries the kind's own figure and its validity, the progress line reads it, and the
report's tables, the site's sections and the charts show it."""

import asyncio

import pytest
from pydantic import BaseModel, ConfigDict, Field

from servebook.config import Plan
from servebook.measure.cells import objective_figures, summarize_cell
from servebook.measure.kinds import CellSpec, KindBase, cell_line, kind_of, label, plan_cells, register, unregister
from servebook.measure.loop import send_cell
from servebook.measure.observers.reconcile import Check, Reconciliation
from servebook.measure.transport.client import RequestRecord
from servebook.measure.workloads import Workloads
from servebook.present.figures import figure_specs
from servebook.present.kinds import (
    CHECK,
    Column,
    LineChart,
    PresentKind,
    RunTable,
    Section,
    register_present,
    unregister_present,
)
from servebook.present.load_tables import cell_tables
from servebook.present.site.pages import sections
from servebook.present.site.summary import RunSummary


# 1. The plan section: in the repository, one field of config/plan.py's Plan (`echo: EchoPlan | None = None`).
class EchoSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    concurrency: list[int] = Field(default_factory=lambda: [1, 2])
    output_tokens: int = Field(4, ge=2)


class PlanWithEcho(Plan):
    echo: EchoSection | None = None


# 2. The kind's module: in the repository, measure/kinds/echo.py, which ends with `register(Echo())`.
class Echo(KindBase):
    """A trivial kind: `concurrency` requests that answer at once, 10 ms apart."""

    name = "echo"
    order = 45  # after waves, before open-loop load

    def cells(self, plan):
        section = getattr(plan, "echo", None)
        return [] if section is None else [CellSpec(f"echo-c{c}", "echo", "prose", c, c, section.output_tokens)
                                           for c in section.concurrency]

    async def send(self, workloads, spec, on_done):
        records = []
        for i in range(spec.n_requests):
            record = workloads.record(spec, f"{spec.cell_id}-{i}", spec.output_tokens)
            record.t_send, record.t_first, record.t_last = i * 0.01, i * 0.01 + 0.002, i * 0.01 + 0.005
            record.prompt_tokens, record.completion_tokens, record.cached_tokens = 8, spec.output_tokens, 0
            records.append(record)
            on_done()
        return records

    def figures(self, spec, records, slots):
        ok = [r for r in records if r.ok]
        return {"echo_tok_s": sum(r.completion_tokens for r in ok) / (ok[-1].t_last - ok[0].t_send)}

    def label(self, spec):
        return f"echo x{spec.concurrency}"

    def line(self, summary):
        return f"{summary['echo_tok_s']:.0f} tok/s echoed"


# 3. The present entry: in the repository, one item of present/kinds.py's PRESENT.
ECHO_PRESENT = PresentKind(
    table=RunTable("Echo", (Column("Concurrency", "concurrency", "int"), Column("Echo tok/s", "echo_tok_s", ".0f"),
                            CHECK), sort=("concurrency",)),
    section=Section("Echo", ["Echo tok/s: completion tokens over the cell's span."]),
    charts=(LineChart("concurrency", "echo_tok_s", "Echo rate vs concurrency", "concurrent requests", "tok/s"),))


@pytest.fixture
def echo_kind():
    kind = register(Echo())
    register_present("echo", ECHO_PRESENT)
    yield kind
    unregister("echo")
    unregister_present("echo")


def test_a_kind_is_its_plan_section_its_module_and_its_present_entry(echo_kind):
    plan = PlanWithEcho.model_validate({"decode": {"concurrency": [1], "categories": ["prose"]}, "prefill": None,
                                        "echo": {"concurrency": [1, 3]}})
    cells = plan_cells(plan)
    assert [c.cell_id for c in cells] == ["decode-prose-c1", "echo-c1", "echo-c3"]  # its place among the kinds
    spec = cells[-1]
    assert kind_of("echo") is echo_kind and label(spec) == "echo x3"

    done: list[int] = []
    workloads = Workloads(None, plan, "test", None, None, "model")  # the kind sends without the network
    records: list[RequestRecord] = asyncio.run(send_cell(workloads, spec, lambda: done.append(1)))
    assert len(records) == len(done) == 3

    reconciled = Reconciliation("ok", [Check("generated tokens", 12, 12)])
    row = summarize_cell(spec, records, reconciled)
    assert row["kind"] == "echo" and row["valid"], row["invalid_reasons"]
    assert row["echo_tok_s"] == pytest.approx(12 / 0.025)
    assert row["aggregate_tok_s"] is None and row["ttft_s"] == pytest.approx(0.002)  # every cell's figures too
    assert objective_figures(spec, records, plan) == {}  # it reports no objectives (reports_slo is off)
    assert cell_line(spec, row) == "480 tok/s echoed; ok; valid"

    shown = dict(row, candidate="a", run_id="r", order=0)
    [table] = [t for t in cell_tables([shown]) if t.title == "Echo"]
    assert table.rows[0].values == [3, "480", "valid; counters ok"]
    [section] = [s for s in sections([RunSummary.model_construct(label="a", run_id="r", cells=[row])]) if s["title"] == "Echo"]
    assert section["definitions"] == ECHO_PRESENT.section.definitions
    titles = [spec["layout"]["title"]["text"] for spec in figure_specs([shown], {})]
    assert any(title.startswith("Echo rate") for title in titles)


def test_a_second_kind_of_the_same_name_is_refused(echo_kind):
    with pytest.raises(ValueError, match="registered already"):
        register(Echo())
    with pytest.raises(KeyError, match="no cell kind 'unknown'"):
        kind_of("unknown")
