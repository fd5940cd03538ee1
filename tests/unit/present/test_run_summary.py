"""The site draws every page from typed run summaries: what a run yields survives the build cache unchanged, and
a field the model does not know is an error, not a page that quietly shows nothing."""

import pytest
from pydantic import ValidationError

from servebook.journal import Journal, samples
from servebook.present.site.pages import status_reason, summarize_run
from servebook.present.site.summary import RunSummary


def test_every_sample_run_summarises_and_reads_back_from_the_cache_as_it_was():
    runs = Journal(samples.sample_journal("sample-journal-vllm")).runs()
    for record in runs:
        summary = summarize_run(record)
        assert RunSummary.model_validate_json(summary.model_dump_json(fallback=str)) == summary
    summary = summarize_run(runs[0])
    assert summary.label == runs[0].candidate_label and summary.cells and summary.verification["claims"]
    assert summary.decode_value is not None and summary.files


def test_a_summary_refuses_a_field_it_does_not_define():
    with pytest.raises(ValidationError, match="decode_valu"):
        RunSummary(run_id="r1", status="completed", decode_valu=3.0)


def test_why_a_run_has_no_verdict_reads_its_typed_fields():
    assert status_reason(RunSummary(run_id="r", status="incomplete")) == ["incomplete: never sealed"]
    failed = RunSummary(run_id="r", status="failed", failure={"cause": "bad_flag", "message": "-x"})
    assert status_reason(failed) == ["bad_flag: -x"]


def test_a_resident_rounds_other_seats_show_beside_the_foreign_cpu_never_in_it():
    from servebook.present.site.pages import cells_detail

    cell = {"cell_id": "prefill-8192", "requests": 4, "errors": 0, "prompt_tokens": 32768, "cached_tokens": 0,
            "completion_tokens": 4, "reconciliation": "ok", "reconciliation_message": "-", "valid": True}
    rows = cells_detail(RunSummary(run_id="r", status="completed", cells=[
        {**cell, "foreign_cpu_cores": 0.05, "seated_cpu_cores": 2.41},
        {**cell, "foreign_cpu_cores": 0.05, "seated_cpu_cores": float("nan")},
        {**cell, "foreign_cpu_cores": None},
        {**cell, "foreign_cpu_cores": 0.05, "seated_cpu_cores": 2.7, "contending_cpu_cores": 2.65},
        {**cell, "foreign_cpu_cores": 0.05, "seated_cpu_cores": 6.6, "contending_cpu_cores": 0.0}])).rows
    others = [row.values[8] for row in rows]
    assert others == ["0.05 cores (+ 2.41 the round's other seats)", "0.05 cores", "not checked",
                      "0.05 cores (+ 2.70 the round's other seats, 2.65 of it on this engine's CPUs)",
                      "0.05 cores (+ 6.60 the round's other seats)"]


def test_the_sites_noise_floor_pools_the_baselines_spread_within_machines():
    """The study page draws its noise floor from run summaries: each is marked with its machine, as the verdicts mark
    runs, so two machines' speeds are not read as the baseline's noise."""
    from servebook.present.site.pages import noise_table_for

    def summary(i: int, machine: str, rate: float) -> RunSummary:
        cell = {"cell_id": "decode-prose-c1", "kind": "decode", "category": "prose", "concurrency": 1,
                "target_prompt_tokens": None, "aggregate_tok_s": rate, "valid": True, "invalid_codes": "",
                "invalid_reasons": "", "reconciliation": "ok"}
        return RunSummary(run_id=f"r{i}", status="completed", label="base", cells=[cell],
                          environment={"machine_id": machine})

    rules = {"baseline": "base", "rules": [{"metric": "aggregate_tok_s", "concurrency": [1], "max_regression_pct": 5}]}
    runs = [summary(i, m, r) for i, (m, r) in enumerate([("h200", 198.0), ("h200", 202.0), ("h100", 149.0),
                                                          ("h100", 151.0)])]
    table, notes = noise_table_for({"base": runs}, rules)
    [row] = table.rows
    assert notes == []  # no verdict compared a candidate here: nothing for the floor to part from
    assert row.values[3].startswith("1.2% (within 2 machines)")  # not the 17% the two machines' speeds make
