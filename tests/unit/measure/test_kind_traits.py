"""What the rest of servebook asks of a cell kind, it asks the kind (issue 31): a new kind with the same traits is
drawn and computed like the shipped ones, and no module outside the kinds' homes spells a kind's name."""

import re
from pathlib import Path

import pytest

from servebook.config.metrics import METRICS, measured_by
from servebook.measure.kinds import KindBase, kind_of, register, traits_of, unregister
from servebook.present.frontier import load_cells
from servebook.present.kinds import PresentKind, register_present, turn_chart_kinds, unregister_present
from servebook.present.load_tables import latency_table, load_table

LIB = Path(__file__).parents[3] / "lib" / "servebook"
#: the kinds' homes, where their names are theirs to spell
HOMES = ("measure/kinds/", "present/kinds.py", "config/metrics.py")


class Burst(KindBase):
    name = "burst"
    open_loop = True


class Derived(KindBase):
    name = "summed"
    derived = True


@pytest.fixture
def new_kinds():
    register(Burst())
    register(Derived())
    register_present("burst", PresentKind(open_loop=True))
    yield
    unregister("burst")
    unregister("summed")
    unregister_present("burst")


def test_a_new_open_loop_kind_is_drawn_and_tabled_as_open_loop(new_kinds):
    cells = [{"kind": "burst", "cell_id": "burst-2rps", "offered_rps": 2.0, "achieved_rps": 1.9, "requests": 40,
              "valid": True, "reconciliation": "ok", "ttft_p50_ms": 12.0},
             {"kind": "summed", "cell_id": "summed", "valid": True, "reconciliation": "ok", "ttft_p50_ms": 12.0}]
    assert [c["cell_id"] for c in load_cells(cells)] == ["burst-2rps"]
    assert load_table(cells) is not None
    table = latency_table(cells)
    assert table is not None and [row.values[0] for row in table.rows if row.values[0]] == ["burst-2rps"]


def test_a_row_without_a_registered_kind_reads_as_every_default():
    for name in (None, float("nan"), "no-such-kind"):
        traits = traits_of(name)
        assert not traits.open_loop and not traits.derived and not traits.reports_slo


def test_the_shipped_kinds_traits():
    assert traits_of("load").open_loop and traits_of("capacity").derived
    assert all(kind_of(measured_by(m)).name == METRICS[m].kind for m in METRICS)
    assert turn_chart_kinds() == {"reuse"}


def test_no_module_outside_the_kinds_homes_compares_a_kind_to_its_name():
    names = "|".join(sorted({m.kind for m in METRICS.values()} | {"wave", "load"}))
    spelled = re.compile(rf"""(==|!=)\s*["']({names})["']|["']({names})["']\s*(==|!=)""")
    found = [f"{path.relative_to(LIB)}:{n}: {line.strip()}" for path in sorted(LIB.rglob("*.py"))
             if not str(path.relative_to(LIB)).startswith(HOMES)
             for n, line in enumerate(path.read_text().splitlines(), 1) if spelled.search(line)]
    assert found == []
