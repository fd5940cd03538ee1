"""A configuration search through real launches: the simulator in place of SGLang, each launch a papermill run of
notebooks/qualify.ipynb. Pruned configurations never start, the budget holds, the record and the site page exist,
and a second search resumes without launching anything."""

import pytest

from servebook.config.loading import study_from_data
from servebook.journal import Journal
from servebook.present.site.builder import build_site
from servebook.simulator.truth import timing_for
from servebook.sweeps import search
from servebook.sweeps.space import Space
from servebook.util.paths import project_root
from tests.helpers.candidates import QUIET, TOLERANT_CORES

pytestmark = pytest.mark.simulator

STUDY = {
    "name": "search-small",
    "base": {"engine": "sglang", "model": {"path": "meta-llama/Llama-3.1-8B-Instruct"},
             "knobs": {"max_running_requests": 4, "context_length": 8192},
             "launch": {"simulator": True, "ready_timeout_s": 30}},
    "search": {
        "space": {"knobs.max_running_requests": [1, 4, 32],
                  "knobs.drafter": [{"kind": "none"}, {"kind": "mtp", "max_draft_tokens": 2, "num_steps": 1, "topk": 1}],
                  "knobs.kv_dtype": ["auto", "fp8_e4m3"]},
        "objective": {"metric": "aggregate_tok_s", "concurrency": 4, "category": "prose"},
        "budget": 9, "screen": {"initial": 3, "plan": {"decode.min_cell_s": 0.5}}, "confirm": {"top": 2, "repeats": 2},
        "memory": {"model": str(project_root() / "data/models/llama-3.1-8b"), "gpu_gib": 48, "gpus": 1}},
    "plan": {"decode": {"concurrency": [4], "categories": ["prose"], "output_tokens": 32, "rounds": 1,
                        "min_cell_s": 1}, "prefill": None, "warmup_requests": 2,
             "max_foreign_cpu_cores": TOLERANT_CORES},
}


def test_a_search_of_real_launches_prunes_screens_confirms_and_resumes(tmp_path):
    study = study_from_data(STUDY, "test study")
    journal = Journal(tmp_path / "journal")
    result = search(study, journal, reporter=QUIET)
    pruned = {p.name for p in result.pruned}
    assert pruned == {"max_running_requests=32,drafter=none,kv_dtype=auto",
                      "max_running_requests=32,drafter=mtp-2-1-1,kv_dtype=auto"}
    runs = journal.runs()
    assert len(runs) == result.launches <= 9
    assert all(r.status == "completed" for r in runs), [r.manifest.failure for r in runs if r.manifest]
    assert not {r.manifest.study_entry for r in runs} & pruned, "a pruned configuration never starts"
    assert {r.manifest.study for r in runs} == {"search-small"}
    assert len(result.confirmed) == 2 and all(len(c.run_ids) == 2 for c in result.confirmed)
    assert result.winner in {c.name for c in result.confirmed}
    truth = {c.name: timing_for(study.base.with_overrides(c.overrides)).decode_tok_s(4)
             for c in Space(study.search.space).configs() if c.name not in pruned}
    assert truth[result.winner] >= sorted(truth.values())[len(truth) // 2], "the winner is at least a median config"
    # resumable: nothing more is launched, and the site shows the search
    again = search(study, journal, reporter=QUIET)
    assert len(journal.runs()) == len(runs) and again.winner == result.winner
    build_site(journal, tmp_path / "site", QUIET)
    page = (tmp_path / "site/searches/search-small.html").read_text()
    assert "why never launched" in page and result.winner in page
