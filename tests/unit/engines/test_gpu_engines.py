"""SGLang, vLLM and generic OpenAI adapters, metrics samples, GPU preflight and compose rendering."""

import json

import pytest
from pydantic import ValidationError

from servebook.config import InputError
from servebook.engines import get_engine
from servebook.engines.counters import parse_metrics
from servebook.launch.compose import render
from servebook.launch.gpu_inventory import Inventory, interconnect, parse_cuda, parse_gpus, parse_p2p, parse_processes
from servebook.launch.preflight import gpu_checks
from tests.helpers.candidates import make_candidate


def candidate(engine, knobs=None, **extra):
    return make_candidate(engine, knobs=knobs or {}, **extra)


def argv(c):
    return get_engine(c.engine).argv(c, port=30000, model_path=c.model.id, draft_path=c.knobs.drafter.model)


def value(args, flag):
    return args[args.index(flag) + 1]


def test_sglang_flags_follow_the_recipe():
    c = candidate("sglang", {"tensor_parallel_size": 2, "chunk_size": 6144, "max_running_requests": 4,
                             "context_length": 524288, "kv_dtype": "fp8_e4m3",
                             "drafter": {"kind": "eagle", "model": "org/eagle", "num_steps": 3, "topk": 1,
                                         "max_draft_tokens": 4}})
    args = argv(c)
    assert args[:3] == ["sglang", "serve", "--model-path"]
    assert value(args, "--tp-size") == "2" and value(args, "--chunked-prefill-size") == "6144"
    assert value(args, "--max-running-requests") == "4" and value(args, "--context-length") == "524288"
    assert value(args, "--kv-cache-dtype") == "fp8_e4m3" and value(args, "--revision") == "abc123"
    assert value(args, "--speculative-algorithm") == "EAGLE"
    assert value(args, "--speculative-draft-model-path") == "org/eagle"
    assert (value(args, "--speculative-num-steps"), value(args, "--speculative-eagle-topk"),
            value(args, "--speculative-num-draft-tokens")) == ("3", "1", "4")
    assert "--enable-metrics" in args


def test_sglang_speculative_tree_is_all_or_nothing():
    with pytest.raises(ValidationError, match="all three or none"):
        candidate("sglang", {"drafter": {"kind": "eagle", "model": "m", "num_steps": 3}})
    with pytest.raises(ValidationError, match="kv_dtype"):
        candidate("sglang", {"kv_dtype": "q8_0"})
    with pytest.raises(ValidationError, match="--chunked-prefill-size conflicts with knobs.chunk_size"):
        candidate("sglang", extra_args=["--chunked-prefill-size", "4096"])


def test_vllm_flags_and_speculative_config():
    c = candidate("vllm", {"tensor_parallel_size": 2, "chunk_size": 8192, "max_running_requests": 16,
                           "kv_dtype": "fp8", "context_length": 262144, "drafter": {"kind": "mtp", "max_draft_tokens": 1}})
    args = argv(c)
    assert args[:3] == ["vllm", "serve", "org/model"]
    assert value(args, "-tp") == "2" and value(args, "--max-num-batched-tokens") == "8192"
    assert "--enable-chunked-prefill" in args and value(args, "--max-num-seqs") == "16"
    assert value(args, "--max-model-len") == "262144" and value(args, "--kv-cache-dtype") == "fp8"
    assert json.loads(value(args, "--speculative-config")) == {"method": "mtp", "num_speculative_tokens": 1}
    with pytest.raises(ValidationError, match="SGLang settings"):
        candidate("vllm", {"drafter": {"kind": "eagle", "model": "m", "num_steps": 2}})


def test_generic_openai_engine_takes_no_knobs_and_a_port_template():
    with pytest.raises(ValidationError, match="cannot apply knobs"):
        candidate("openai", {"chunk_size": 512}, launch={"mode": "attach", "url": "http://127.0.0.1:9"})
    with pytest.raises(ValidationError, match=r"\{port\}"):
        candidate("openai", launch={"command": ["./start.sh"]})
    c = candidate("openai", launch={"command": ["./start.sh", "--port", "{port}", "--model", "{model}"]})
    assert argv(c) == ["./start.sh", "--port", "30000", "--model", "org/model"]
    assert get_engine("openai").server_counts(parse_metrics(""), parse_metrics("")) is None


def test_launch_modes_are_validated():
    with pytest.raises(ValidationError, match="attach mode needs the URL"):
        candidate("vllm", launch={"mode": "attach"})
    with pytest.raises(ValidationError, match="compose mode needs a container image"):
        candidate("vllm", launch={"mode": "compose"})
    with pytest.raises(ValidationError, match="sim_faults needs"):
        candidate("vllm", launch={"sim_faults": ["crash_mid_stream"]})
    with pytest.raises(ValidationError, match="look like secrets"):
        candidate("vllm", launch={"env": {"HF_TOKEN": "hf_x"}})
    real, simulated = candidate("vllm"), candidate("vllm", launch={"simulator": True})
    assert real.id != simulated.id, "a simulated run must never share an id with a real one"


SGLANG_SAMPLE = """\
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="glm",tp_rank="0"} 1000.0
sglang:prompt_tokens_total{model_name="glm",tp_rank="1"} 24.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="glm"} 300.0
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{model_name="glm"} 200.0
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="glm"} 2.0
"""
VLLM_OLD = """\
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 500.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 100.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.5
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{engine="0",model_name="m"} 64.0
"""
VLLM_NEW = VLLM_OLD.replace("gpu_cache_usage_perc", "kv_cache_usage_perc").replace(
    "gpu_prefix_cache_hits", "prefix_cache_hits").replace("500.0", "740.0").replace("100.0", "164.0") + """\
# TYPE vllm:prompt_tokens_cached_total counter
vllm:prompt_tokens_cached_total{engine="0",model_name="m"} 32.0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 40.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 30.0
"""


def test_sglang_counts_include_cached_and_sum_ranks():
    before = parse_metrics(SGLANG_SAMPLE)
    after = parse_metrics(SGLANG_SAMPLE.replace("1000.0", "1500.0").replace("300.0", "428.0").replace("200.0", "264.0"))
    counts = get_engine("sglang").server_counts(before, after)
    assert (counts.prompt_tokens, counts.cached_tokens, counts.generation_tokens) == (500, 64, 128)


def test_vllm_counts_across_builds_without_faking_a_missing_counter():
    old, new = parse_metrics(VLLM_OLD), parse_metrics(VLLM_NEW)
    counts = get_engine("vllm").server_counts(old, new)
    assert counts.prompt_tokens == 240 and counts.generation_tokens == 64
    assert counts.cached_tokens is None  # the older build had no cached counter: not judged, not faked
    assert get_engine("vllm").server_counts(new, new).draft_tokens == 0


NVIDIA_SMI = """\
0, GPU-aaaa, NVIDIA H200, 143771, 1024, 142747, 0, 700.00, 570.86
1, GPU-bbbb, NVIDIA H200, 143771, 90000, 53771, 95, 600.00, 570.86
2, GPU-cccc, NVIDIA H200, 143771, 10, 143761, 0, [N/A], 570.86
"""
APPS = "GPU-bbbb, 4242, 88000, python3\n"
TOPO = """\
 \tGPU0\tGPU1\tGPU2
 GPU0\tX\tOK\tNS
 GPU1\tOK\tX\tOK
 GPU2\tNS\tOK\tX

Legend:
  X    = Self
  OK   = Status Ok
  NS   = Not supported
"""


def inventory():
    gpus = parse_gpus(NVIDIA_SMI)
    parse_processes(APPS, gpus)
    return Inventory(gpus, parse_cuda("| NVIDIA-SMI 570.86  Driver Version: 570.86  CUDA Version: 12.8 |"),
                     parse_p2p(TOPO))


# `nvidia-smi topo -m` as NVIDIA documents it for a host of four GPUs, two NVLinked pairs across sockets, with a NIC
# column and the affinity columns after the GPUs (written from the format, not recorded: no host of several GPUs
# has been lent since; the single-GPU hosts print no matrix worth keeping)
TOPO_M = """\
\x1b[4m\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m
GPU0\t X \tNV18\tSYS\tSYS\tPXB\t0-55\t0\t\tN/A
GPU1\tNV18\t X \tSYS\tSYS\tPXB\t0-55\t0\t\tN/A
GPU2\tSYS\tSYS\t X \tNV18\tSYS\t56-111\t1\t\tN/A
GPU3\tSYS\tSYS\tNV18\t X \tSYS\t56-111\t1\t\tN/A
NIC0\tPXB\tPXB\tSYS\tSYS\t X \t\t\t\t

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def test_the_links_a_tensor_parallel_group_crosses_are_recorded():
    """Issue 57, item 3: the GPU topology a layout was measured over, so two hosts' layouts are told apart."""
    links = parse_p2p(TOPO_M)
    assert links[(0, 1)] == "NV18" and links[(2, 3)] == "NV18" and links[(0, 2)] == "SYS" and (0, 4) not in links
    found = Inventory(parse_gpus(NVIDIA_SMI), links=links).fingerprint()
    assert found["gpu_links"] == {"0-1": "NV18", "0-2": "SYS", "0-3": "SYS", "1-2": "SYS", "1-3": "SYS",
                                  "2-3": "NV18"}
    assert found["gpu_interconnect"] == "PCIe across the CPU interconnect (SYS) between 0 and 2"
    paired = {(0, 1): "NV18", (1, 0): "NV18"}
    assert interconnect(paired) == "NVLink (NV18) between every pair"
    assert "gpu_links" not in Inventory(parse_gpus(NVIDIA_SMI)).fingerprint()  # one GPU, or none read: nothing said


def test_nvidia_smi_parsing():
    inv = inventory()
    assert [g.name for g in inv.gpus] == ["NVIDIA H200"] * 3
    assert inv.gpus[1].processes[0]["pid"] == 4242 and inv.gpus[2].power_limit_w is None
    assert inv.cuda == "12.8" and inv.p2p[(0, 2)] == "NS" and inv.p2p[(0, 1)] == "OK"
    assert inv.fingerprint()["gpu_count"] == 3 and inv.fingerprint()["driver"] == "570.86"


def codes(findings):
    return sorted(f.code for f in findings)


def test_preflight_codes():
    tp2 = {"tensor_parallel_size": 2}
    busy = candidate("sglang", tp2, launch={"gpus": [0, 1], "resources": {"gpu_memory_gib": 100, "power_limit_w": 700}})
    assert codes(gpu_checks(busy, inventory())) == ["E_GPU_BUSY", "E_GPU_MEMORY", "W_POWER"]
    no_p2p = candidate("vllm", tp2, launch={"gpus": [0, 2]})
    assert codes(gpu_checks(no_p2p, inventory())) == ["E_P2P"]
    missing = candidate("vllm", launch={"gpus": [7]})
    assert codes(gpu_checks(missing, inventory())) == ["E_GPU_MISSING"]
    clean = candidate("vllm", launch={"gpus": [2], "resources": {"gpu_memory_gib": 100}})
    assert gpu_checks(clean, inventory()) == []
    no_gpu = gpu_checks(candidate("vllm"), Inventory([], note="no nvidia-smi on this host: GPU checks skipped"))
    assert [(f.code, f.level) for f in no_gpu] == [("N_NO_GPU", "note")]


def test_compose_renders_one_service_per_replica():
    c = candidate("sglang", {"tensor_parallel_size": 2},
                  launch={"mode": "compose", "image": "lmsysorg/sglang:v0.5.23", "replicas": 2, "gpus": [4, 5, 6, 7],
                          "compile_cache": "/cache", "volumes": ["/hf:/root/.cache/huggingface"]},
                  pins={"image_digest": "sha256:" + "ab" * 32})
    plan = render(c, get_engine("sglang"), model_path="org/model", draft_path=None, first_port=31000)
    services = plan.document["services"]
    assert list(services) == ["sglang-r0", "sglang-r1"]
    r0, r1 = services["sglang-r0"], services["sglang-r1"]
    assert r0["image"] == "lmsysorg/sglang:v0.5.23@sha256:" + "ab" * 32  # the digest wins; the tag stays readable
    assert r0["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == ["4", "5"]
    assert r1["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == ["6", "7"]
    assert r0["ports"] == ["127.0.0.1:31000:30000"] and r1["ports"] == ["127.0.0.1:31001:30000"]
    caches = [next(v for v in s["volumes"] if v.startswith("/cache")) for s in (r0, r1)]
    assert caches[0] != caches[1], "each replica needs its own compile cache"
    assert "--host" in r0["entrypoint"] and r0["entrypoint"][r0["entrypoint"].index("--host") + 1] == "0.0.0.0"
    commands = plan.commands("compose.yaml")
    ups = [i for i, cmd in enumerate(commands) if "up" in cmd]
    waits = [i for i, cmd in enumerate(commands) if cmd[0].startswith("<wait")]
    assert ups[0] < waits[0] < ups[1] < waits[1], "replicas start one after another, each waited for"
    assert commands[-1][-3:] == ["down", "--timeout", "30"]


def test_compose_needs_enough_gpus():
    c = candidate("vllm", {"tensor_parallel_size": 2}, launch={"mode": "compose", "image": "x", "replicas": 2,
                                                                "gpus": [0, 1, 2]})
    with pytest.raises(InputError, match="need 4 GPUs, only 3 listed"):
        render(c, get_engine("vllm"), model_path="m", draft_path=None, first_port=1)
