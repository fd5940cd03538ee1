"""The committed H200 journal: real GPU runs that every version of servebook must still read and judge."""

from pathlib import Path

from servebook.config import load_study
from servebook.journal import Journal
from servebook.sweeps.search import SearchResult
from servebook.verdicts import judge

ROOT = Path(__file__).parents[3]


def test_the_h200_study_reads_and_judges_as_published():
    journal = Journal(ROOT / "data" / "sample-journal")
    runs = [r for r in journal.runs() if r.manifest.study == "h200-1b-llamacpp"]
    assert len(runs) == 29 and {r.status for r in runs} == {"completed"}
    environment = runs[0].manifest.environment
    assert environment.gpus[0]["name"] == "NVIDIA H200" and environment.model_extra["engine_backend"] == "cuda"
    for record in runs:
        cells, telemetry = record.table("cells"), record.table("telemetry")
        assert cells["gpu_power_w"].notna().all() and cells["joules_per_token"].notna().all()
        assert set(telemetry["cell_id"]) == set(cells["cell_id"]) and (telemetry["source"] == "gpu").any()
    outcomes = {item.entry.name: item.verdict.outcome
                for item in judge(load_study(ROOT / "data/studies/h200-1b-llamacpp.yaml"), journal, append=False)}
    # Published with the study model, at most 6 launches per side (sweep --until-decided --max-repeats 6).
    assert outcomes == {"baseline": "accepted", "chunk-512": "inconclusive", "chunk-8192": "rejected",
                        "slots-8": "rejected", "draft-model": "rejected", "ngram": "inconclusive"}
    assert max(sum(r.manifest.candidate["name"] == name for r in runs) for name in outcomes) <= 6


def test_the_h200_capacity_and_search_read_as_published():
    journal = Journal(ROOT / "data" / "sample-journal")
    capacity = {r.manifest.candidate["name"]: r.table("cells").set_index("cell_id").loc["capacity"]
                for r in journal.runs() if r.manifest.study == "h200-1b-capacity"}
    assert set(capacity) == {"baseline", "slots-8"}
    # 32 slots hold more before the objectives fail, and fall off a cliff; 8 slots degrade gradually
    assert capacity["baseline"]["capacity_rps"] > capacity["slots-8"]["capacity_rps"] > 8
    assert capacity["baseline"]["capacity_cliff"] and not capacity["slots-8"]["capacity_cliff"]
    # the committed study still names the plan these runs measured (its plan id), so they are judged, not "not run"
    judged = judge(load_study(ROOT / "data/studies/h200-1b-capacity.yaml"), journal, append=False)
    assert all(item.verdict is not None and len(item.records) == 1 for item in judged)
    [event] = journal.searches("h200-1b-search")
    search = SearchResult.from_json(event)
    assert search.launches <= 10 and search.winner is not None and search.decision == "indistinguishable"
    assert all(run_id in {r.run_id for r in journal.runs()} for c in search.confirmed for run_id in c.run_ids)
