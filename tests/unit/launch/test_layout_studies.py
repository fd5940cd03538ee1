"""The seeds' multi-GPU question as studies (issue 57): on four GPUs, TP1 x 4, TP2 x 2 and TP4 x 1 behind a
router, each layout's replicas on GPUs of their own; and the scaling study of one, two and four replicas, which
shares the layouts study's plan and four-replica candidate so that one journal's runs serve both."""

from pathlib import Path

from servebook.config import load_study
from servebook.engines import get_engine
from servebook.launch.replicas import gpu_split

STUDIES = Path(__file__).resolve().parents[3] / "data" / "studies"


def test_every_layout_uses_all_four_gpus_and_no_replica_shares_one():
    study = load_study(STUDIES / "h100x4-vllm-layouts.yaml")
    split = {e.name: [env["CUDA_VISIBLE_DEVICES"] for env in gpu_split(e.candidate, get_engine("vllm"))]
             for e in study.expand()}
    assert split == {"baseline": ["0", "1", "2", "3"], "tp1x4-round-robin": ["0", "1", "2", "3"],
                     "tp2x2": ["0,1", "2,3"], "tp4x1": ["0,1,2,3"]}
    policies = {e.name: e.candidate.launch.router.policy for e in study.expand()}
    assert policies["baseline"] == "cache_aware" and policies["tp1x4-round-robin"] == "round_robin"


def test_the_scaling_study_shares_the_plan_and_the_four_replica_candidate():
    layouts = load_study(STUDIES / "h100x4-vllm-layouts.yaml")
    scaling = load_study(STUDIES / "h100x4-vllm-scaling.yaml")
    assert layouts.plan.id == scaling.plan.id
    four = {e.name: e.candidate.id for e in scaling.expand()}["tp1x4"]
    assert four == {e.name: e.candidate.id for e in layouts.expand()}["baseline"]
    replicas = [e.candidate.launch.replicas for e in scaling.expand()]
    assert replicas == [1, 2, 4] and [r.min_efficiency for r in scaling.verdict.scaling] == [0.8, 0.8]
