"""The example GPU studies are the seeds' own recipes: their dry runs carry the seeds' flags and values."""

from servebook.config.loading import load_study
from servebook.engines import get_engine
from servebook.util.paths import repo_data_dir


def lines(study_name: str) -> dict[str, list[str]]:
    study = load_study(repo_data_dir() / "studies" / f"{study_name}.yaml")
    out = {}
    for entry in study.expand():
        c = entry.candidate
        out[entry.name] = get_engine(c.engine).argv(c, port=30000, model_path=c.model.id, draft_path=c.knobs.drafter.model)
    return out


def pairs(argv: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for i, arg in enumerate(argv):
        if arg.startswith("-"):
            following = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
            out[arg] = following
    return out


def test_the_sglang_study_is_seed_000():
    seed_000 = {"--model-path": "ormandj/GLM-5.3-Flash-W4A16-NVFP4-K32-Experts-FP8-WO", "--revision": "ee0989a9",
                "--served-model-name": "glm-5.3-flash", "--tp-size": "2", "--context-length": "524288",
                "--max-total-tokens": "500000", "--max-prefill-tokens": "6144", "--max-running-requests": "4",
                "--max-mamba-cache-size": "28", "--chunked-prefill-size": "6144", "--kv-cache-dtype": "fp8_e4m3",
                "--speculative-algorithm": "NEXTN"}
    all_lines = lines("glm-5.3-flash-sglang-tp2")
    baseline = pairs(all_lines["baseline"])
    assert all_lines["baseline"][:2] == ["sglang", "serve"]
    assert {flag: baseline.get(flag) for flag in seed_000} == seed_000
    assert "--speculative-draft-model-path" not in baseline  # NextN drafts with the checkpoint's own layer
    assert pairs(all_lines["chunk-4096"])["--chunked-prefill-size"] == "4096"
    assert pairs(all_lines["chunk-8192"])["--chunked-prefill-size"] == "8192"
    assert pairs(all_lines["running-8"])["--max-running-requests"] == "8"
    assert pairs(all_lines["dflash2"])["--speculative-algorithm"] == "DFLASH"


def test_the_vllm_study_is_seed_004():
    seed_004 = {"-tp": "2", "--max-model-len": "262144", "--kv-cache-dtype": "fp8_ds_mla", "--max-num-seqs": "8",
                "--gpu-memory-utilization": "0.98", "--kv-cache-memory-bytes": "2415919104", "--dtype": "bfloat16",
                "--quantization": "modelopt_mixed", "--moe-backend": "humming",
                "--attention-backend": "FLASHINFER_MLA_SPARSE_SM120", "--disable-custom-all-reduce": None,
                "--no-enforce-eager": None, "--reasoning-parser": "glm47", "--tool-call-parser": "glm47",
                "--enable-auto-tool-choice": None}
    all_lines = lines("vllm-nvfp4-tp2")
    baseline = pairs(all_lines["baseline"])
    assert {flag: baseline.get(flag, "absent") for flag in seed_004} == seed_004
    # the seed leaves chunked prefill at vLLM's defaults and sets no drafter; MTP is the question
    assert "--max-num-batched-tokens" not in baseline and "--speculative-config" not in baseline
    assert pairs(all_lines["mtp"])["--speculative-config"] == '{"method":"mtp","num_speculative_tokens":1}'
