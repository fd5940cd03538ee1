"""`servebook compare` decides cells as the verdicts do (Holm across the cells), and its time bounds are instants."""

import pytest

from servebook.config import InputError
from servebook.config.slices import JournalSlice, parse_slice
from servebook.journal import Journal
from servebook.journal.synthetic import write_synthetic_run
from servebook.present.history import SliceComparisonView
from servebook.util.render import to_text
from servebook.verdicts import compare_slices, default_rules


def two_configurations(tmp_path, slower: float) -> Journal:
    journal = Journal(tmp_path / "journal")
    for i in range(3):
        write_synthetic_run(journal, index=2 * i, label="a", chunk_size=64, requests=20, speed=1.0,
                            started_at=f"2026-11-{10 + i:02d}T00:00:00Z")
        write_synthetic_run(journal, index=2 * i + 1, label="b", chunk_size=128, requests=20, speed=slower,
                            started_at=f"2026-11-{10 + i:02d}T01:00:00Z")
    return journal


def test_a_regression_far_beyond_the_limit_is_reported_as_one(tmp_path):
    result = compare_slices(two_configurations(tmp_path, 0.765), JournalSlice(candidate="a"),
                            JournalSlice(candidate="b"), default_rules(5.0)[:1])
    assert result.comparisons and all(c.change_high_pct < -15 for c in result.comparisons)
    assert {c.decision for c in result.comparisons} == {"fail"}, [c.decision for c in result.comparisons]
    shown = to_text(SliceComparisonView(result).blocks(), width=200)
    assert "undecided" not in shown and "no (limit 5%)" in shown


def test_an_unchanged_configuration_is_within_the_limit(tmp_path):
    result = compare_slices(two_configurations(tmp_path, 1.0), JournalSlice(candidate="a"),
                            JournalSlice(candidate="b"), default_rules(5.0)[:1])
    assert {c.decision for c in result.comparisons} == {"pass"}


@pytest.mark.parametrize("text", ["since=12/31/2099", "until=yesterday", "since=2026-13-01"])
def test_a_time_bound_that_is_not_iso_is_refused_naming_it(text):
    with pytest.raises(InputError, match=text.split("=")[0]):
        parse_slice(text, "--b")


def test_time_bounds_are_instants(tmp_path):
    journal = two_configurations(tmp_path, 1.0)
    index = journal.index()
    assert len(parse_slice("candidate=a,since=2099-12-31").select(index)) == 0
    assert len(parse_slice("candidate=a,since=2026-11-11T02:00:00+02:00").select(index)) == 2  # 00:00 UTC
    with pytest.raises(InputError, match="--since"):
        journal.select(since="12/31/2099")
