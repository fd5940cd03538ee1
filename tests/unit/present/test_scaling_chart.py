"""A study whose candidates differ in replicas gets a chart of its figure against replica count with the ideal
line; a study whose candidates all have one replica does not."""

import pytest

from servebook.present.scaling import ScalingPoint, scaling_spec
from servebook.present.site.pages import scaling_points, study_charts
from servebook.present.site.summary import RunSummary


def run(i: int, replicas: int, *, capacity: float | None = None, decode: float | None = None,
        status: str = "completed") -> RunSummary:
    return RunSummary(run_id=f"r{i}", status=status, label=f"x{replicas}",
                      candidate={"launch": {"replicas": replicas}}, capacity_value=capacity, decode_value=decode)


def test_capacity_against_replicas_is_drawn_with_the_ideal_line_from_the_fewest_replicas():
    runs = [run(1, 1, capacity=10.0), run(2, 1, capacity=12.0), run(3, 2, capacity=19.0), run(4, 2, capacity=21.0),
            run(5, 4, capacity=30.0), run(6, 2, capacity=99.0, status="failed")]
    points = scaling_points(runs)
    assert [(p.replicas, p.value) for p in points] == [(1, 10.0), (1, 12.0), (2, 19.0), (2, 21.0), (4, 30.0)]
    assert {p.figure for p in points} == {"capacity (requests/s)"}
    measured, ideal = scaling_spec(points)["data"]
    # each point the geometric mean of its runs, the bars their range (two runs), as the tables show them
    one, two = (10.0 * 12.0) ** 0.5, (19.0 * 21.0) ** 0.5
    assert measured["x"] == [1, 2, 4] and measured["y"] == pytest.approx([one, two, 30.0])
    assert measured["error_y"]["array"][0] == pytest.approx(12.0 - one)
    assert measured["error_y"]["array"][2] is None  # one run: no interval
    assert ideal["y"] == pytest.approx([one, 2 * one, 4 * one]), "the fewest replicas' figure times N"


def test_decode_is_drawn_where_a_run_measured_no_capacity():
    points = scaling_points([run(1, 1, capacity=10.0, decode=50.0), run(2, 2, decode=90.0)])
    assert [(p.replicas, p.value, p.figure) for p in points] == [(1, 50.0, "aggregate decode (tok/s)"),
                                                                 (2, 90.0, "aggregate decode (tok/s)")]


def test_the_chart_is_on_a_study_page_only_where_replicas_differ():
    forest = {"data": [], "layout": {}}
    one = [run(1, 1, capacity=10.0), run(2, 1, capacity=11.0)]
    assert [c["id"] for c in study_charts(forest, one)] == ["study-forest"]
    several = one + [run(3, 2, capacity=20.0)]
    assert [c["id"] for c in study_charts(forest, several)] == ["study-forest", "study-scaling"]
    title = scaling_spec([ScalingPoint(1, 5.0, "capacity (requests/s)")])["layout"]["title"]["text"]
    assert title.replace("<br>", " ") == "capacity (requests/s) against replica count"
