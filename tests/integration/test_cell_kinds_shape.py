"""A run that measures every cell kind (decode, prefill, reuse, wave, load, and the capacity search's probes and row)
records the cells.parquet it recorded before the kinds got a home each (issue 31): the same columns in the same
order and types, the same cells, and in each row the same figures present. Recorded on main at 2f63741; since then
the reasoning columns (measure/figures/reasoning.py) were added after the peers' throughputs, the chat decode cells have an
answer TTFT, the ITL, probe and gauge columns (measure/figures/itl.py, probes.py, gauges.py) follow them, and draft_tokens
stands before draft_acceptance, engine_cpu_probe_ms follows cpu_probe_ms, and next_turn_within_se_pct (a reuse
cell's next-turn error, from its conversations) follows next_turn_ttft_s; the drafter's evidence (draft_accepted_tokens, tokens_per_step, draft_source) follows
draft_acceptance, and the output's realism (measure/figures/realism.py: n-gram, loop and forced-tail shares, the requests
they were read from, a sample) follows invalid_reasons, present in decode cells; the samples behind each latency
(ttft_n, tpot_n, itl_n, e2e_n: measure.figures.tails) follow the peers' throughputs, in every cell that sends; nothing else
changed."""

import json
from pathlib import Path

import pytest

from servebook.config import Plan
from servebook.journal import Journal
from servebook.run import run_candidate
from tests.helpers.candidates import QUIET, simulated

pytestmark = pytest.mark.simulator
RECORDED = Path(__file__).parent / "recorded" / "simulated-cells-shape.json"
PLAN = Plan.model_validate({
    "decode": {"concurrency": [1, 2], "categories": ["prose"], "output_tokens": 16, "rounds": 1},
    "prefill": {"prompt_tokens": [256], "requests": 1}, "warmup_requests": 1, "max_foreign_cpu_cores": 8,
    "reuse": {"conversations": 1, "turns": 2, "first_prompt_tokens": 64, "turn_tokens": 16, "output_tokens": 4},
    "waves": {"concurrency": [6], "waves": 1, "output_tokens": 8, "prompt_tokens": 64},
    "load": {"rates_rps": [4], "duration_s": 2, "warmup_s": 0.5, "prompt_tokens": 64, "output_tokens": 8},
    "slo": {"ttft_s": 2, "tpot_s": 0.5, "attainment": 0.5},
    "capacity": {"low_rps": 2, "high_rps": 8, "max_probes": 2, "min_requests": 10, "narrowing_requests": 10},
})
#: set or not by the host (which CPUs the engine's busiest threads ran on, and whether it is held to some), not by
#: the cell's kind
HOST_DEPENDENT = {"engine_cpus", "engine_cpu_probe_ms"}


def test_every_cell_kind_records_the_columns_it_recorded(tmp_path):
    record = run_candidate(simulated("vllm"), PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    cells = record.table("cells")
    recorded = json.loads(RECORDED.read_text())
    assert list(cells.columns) == recorded["columns"]
    assert {c: str(t) for c, t in cells.dtypes.items()} == recorded["dtypes"]
    rows = [{"cell_id": r["cell_id"], "kind": r["kind"], "codes": r["invalid_codes"],
             "present": sorted(k for k, v in r.items() if v is not None and v == v and k not in HOST_DEPENDENT)}
            for r in cells.to_dict("records")]
    expected = [{**row, "present": [k for k in row["present"] if k not in HOST_DEPENDENT]}
                for row in recorded["rows"]]
    assert rows == expected
