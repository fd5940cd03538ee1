"""Record what a released SGLang or vLLM accepts and exports, from its own code.

Runs inside a throwaway environment where the engine is installed (record-engine-contracts.sh makes
it); needs only the standard library and the engine. It imports the engine's real argument parser
and metric definitions, never starts a server and never loads a model:

    python engine_contract.py sglang --lines lines.json --out sglang-0.5.23.json

`--lines` is a JSON object {study: {candidate: argv}} of servebook's dry-run command lines for that
engine; each is parsed with the real parser and the result is recorded beside the contract.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import io
import json
import os
import sys
import time

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded: a missing file is an error at once


def describe_actions(parser: argparse.ArgumentParser) -> list[dict]:
    flags = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        kind = getattr(action.type, "__name__", None) if action.type is not None else None
        choices = None
        if action.choices is not None:
            with contextlib.suppress(TypeError):
                choices = sorted(str(c) for c in action.choices)
        flags.append({"options": list(action.option_strings), "dest": action.dest, "type": kind,
                      "choices": choices, "nargs": None if action.nargs is None else str(action.nargs),
                      "action": type(action).__name__})
    return sorted(flags, key=lambda f: f["options"][0])


def parse_lines(parser: argparse.ArgumentParser, lines: dict, entry_words: int) -> dict:
    """Each dry-run line through the real parser: "ok", or the parser's own error message."""
    results: dict = {}
    for study, candidates in lines.items():
        for name, argv in candidates.items():
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err):
                    parser.parse_args(argv[entry_words:])
                outcome = "ok"
            except SystemExit:
                outcome = err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else "rejected"
            results.setdefault(study, {})[name] = {"argv": argv, "parsed": outcome}
    return results


def registry_metrics(before: set, at_start_after: callable) -> list[dict]:
    """Every metric created since `before`: its exposition names, labels, and whether a fresh registry has a
    sample of it (a labelled metric has none until its first .labels() call)."""
    from prometheus_client import REGISTRY, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    at_start_after()
    present = {s.name for family in text_string_to_metric_families(generate_latest(REGISTRY).decode())
               for s in family.samples}
    out = []
    for collector in list(REGISTRY._collector_to_names):
        if collector in before or not hasattr(collector, "_labelnames"):
            continue
        kind = collector._type
        name = collector._name
        samples = {"counter": [f"{name}_total"], "gauge": [name], "histogram": [f"{name}_sum", f"{name}_count"],
                   "summary": [f"{name}_sum", f"{name}_count"]}.get(kind, [name])
        # a gauge's mode decides the labels a multi-process server exports it with (a `pid` in "all" and "liveall")
        mode = {"multiprocess_mode": collector._multiprocess_mode} if kind == "gauge" and hasattr(
            collector, "_multiprocess_mode") else {}
        for sample in samples:
            out.append({"name": sample, "type": kind, "labels": sorted(collector._labelnames),
                        "at_start": sample in present, **mode})
    return sorted(out, key=lambda m: m["name"])


# --- SGLang -------------------------------------------------------------------------------------------------------

def sglang_contract(lines: dict) -> dict:
    from prometheus_client import REGISTRY
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")  # as prepare_server_args builds it
    ServerArgs.add_cli_args(parser)
    before = set(REGISTRY._collector_to_names)
    notes = []
    # A server with metrics on, as servebook launches it. Resolving its arguments reads the model's config.json
    # (never its weights): a two-layer Llama shape in a temporary folder is enough, and nothing is downloaded.
    import tempfile

    from sglang.srt.observability import metrics_collector as mc
    from sglang.srt.server_args import set_global_server_args_for_scheduler, set_global_server_args_for_tokenizer

    model = tempfile.mkdtemp()
    with open(os.path.join(model, "config.json"), "w") as config:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                   "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2,
                   "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 4096,
                   "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5}, config)
    server_args = ServerArgs.from_cli_args(parser.parse_args(["--model-path", model, "--enable-metrics",
                                                              "--skip-tokenizer-init", "--device", "cpu"]))
    # the labels tokenizer_metric_labels() and the scheduler give a server without priority scheduling, custom
    # labels or data parallelism
    labels = {"model_name": "m", "engine_type": "unified"}
    try:
        set_global_server_args_for_tokenizer(server_args)
        mc.TokenizerMetricsCollector(server_args=server_args, labels=labels)
    except Exception as error:  # recorded, not hidden: the contract then lacks these metrics
        notes.append(f"TokenizerMetricsCollector: {type(error).__name__}: {error}")
    try:
        set_global_server_args_for_scheduler(server_args)
        mc.SchedulerMetricsCollector(labels={**labels, "tp_rank": 0, "pp_rank": 0, "moe_ep_rank": 0},
                                     server_args=server_args)
    except Exception as error:
        notes.append(f"SchedulerMetricsCollector: {type(error).__name__}: {error}")
    # What the live server exports besides the two collectors (seen on an H100, 2026-12-05): the radix cache's
    # evictions, the HTTP server's request counters, and each process's CPU (observability/cpu_monitor.py)
    # the cache labels its collector with its own class alone (mem_cache/base_prefix_cache.py init_metrics_collector)
    others = {"RadixCacheMetricsCollector": lambda: mc.RadixCacheMetricsCollector(labels={"cache_type": "RadixCache"}),
              "http_request_metrics": lambda: _sglang_http_metrics(),
              "start_cpu_monitor_thread": lambda: _sglang_cpu_monitor()}
    for name, make in others.items():
        try:
            make()
        except Exception as error:
            notes.append(f"{name}: {type(error).__name__}: {error}")
    import msgspec

    fields = sorted(f.name for f in msgspec.structs.fields(ServerArgs)) if hasattr(ServerArgs, "__struct_fields__") \
        else sorted(getattr(ServerArgs, "__dataclass_fields__", {}))
    return {"parser": {"allow_abbrev": parser.allow_abbrev, "underscores": False},
            "flags": describe_actions(parser), "metrics": registry_metrics(before, lambda: None),
            # /server_info is the server args (flat), the scheduler's handshake (managers/scheduler.py get_init_info)
            # and these (entrypoints/http_server.py server_info)
            "server_info_fields": sorted({*fields, "status", "max_total_num_tokens", "max_req_input_len",
                                          "startup_time", "internal_states", "version", "kv_events"}),
            "dry_runs": parse_lines(parser, lines, entry_words=2), "notes": notes}


def _sglang_http_metrics() -> None:
    try:  # 0.5.23 and later: observability/http_request_metrics.py, made at the server's start
        from sglang.srt.observability.http_request_metrics import init_http_request_metrics
    except ImportError:  # 0.5.17: a middleware that makes them (utils/common.py)
        from fastapi import FastAPI
        from sglang.srt.utils.common import add_prometheus_track_response_middleware

        add_prometheus_track_response_middleware(FastAPI())
    else:
        init_http_request_metrics()


def _sglang_cpu_monitor() -> None:
    # the counter is made at once; its thread (a daemon, every 5 s) ends with this script
    from sglang.srt.observability.cpu_monitor import start_cpu_monitor_thread

    start_cpu_monitor_thread("recorder", interval=3600)


# --- vLLM ---------------------------------------------------------------------------------------------------------

def first_import(*spellings: str):
    """The first of `module:name` that imports: releases move things (vLLM 0.26 keeps make_arg_parser in
    entrypoints/openai/cli_args.py, 0.33 in entrypoints/common/cli_args.py)."""
    import importlib

    for spelling in spellings:
        module, name = spelling.split(":")
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"none of {', '.join(spellings)}")


def vllm_parser():
    from vllm.platforms import current_platform

    if not getattr(current_platform, "device_type", ""):
        # 0.26 builds a DeviceConfig while it makes the parser and refuses a host with no platform it knows; the
        # recording loads no model and runs nothing, so any device type will do
        current_platform.device_type = "cpu"
    make_arg_parser = first_import("vllm.entrypoints.common.cli_args:make_arg_parser",
                                   "vllm.entrypoints.openai.cli_args:make_arg_parser")
    parser_class = first_import("vllm.utils.argparse_utils:FlexibleArgumentParser", "vllm.utils:FlexibleArgumentParser")
    return make_arg_parser(parser_class(prog="vllm serve"))


def vllm_contract(lines: dict) -> dict:
    from prometheus_client import REGISTRY

    parser = vllm_parser()
    notes = []
    before = set(REGISTRY._collector_to_names)
    metrics, spec_only = [], []
    try:
        metrics, spec_only = vllm_metrics(before)
    except Exception as error:
        notes.append(f"PrometheusStatLogger: {type(error).__name__}: {error}")
    from typing import get_args

    from vllm.config.cache import CacheDType

    cache_dtypes = sorted(get_args(CacheDType))
    model_card = first_import("vllm.entrypoints.serve.engine.protocol:ModelCard",  # /v1/models entries
                              "vllm.entrypoints.openai.protocol:ModelCard",
                              "vllm.entrypoints.openai.engine.protocol:ModelCard")
    info = sorted(model_card.model_fields)
    # vLLM takes "serve MODEL" as a subcommand; the model is its first positional
    return {"parser": {"allow_abbrev": parser.allow_abbrev, "underscores": True},
            "flags": describe_actions(parser), "metrics": metrics, "spec_only_metrics": spec_only,
            "cache_dtypes": cache_dtypes, "server_info_fields": info,
            "dry_runs": parse_lines(parser, lines, entry_words=2), "notes": notes}


def vllm_metrics(before: set) -> tuple[list[dict], list[str]]:
    """Metrics a PrometheusStatLogger creates, first without a speculative config, then with one. The config is
    a stand-in holding only what the logger reads: no model is loaded."""
    from unittest import mock

    from vllm.v1.metrics.loggers import PrometheusStatLogger

    def config(speculative):
        vllm_config = mock.MagicMock()
        vllm_config.model_config.served_model_name = "m"
        vllm_config.model_config.max_model_len = 4096
        vllm_config.model_config.is_diffusion = False
        vllm_config.observability_config.show_hidden_metrics = False
        vllm_config.observability_config.kv_cache_metrics = False
        vllm_config.observability_config.custom_histogram_buckets = None
        vllm_config.observability_config.enable_mfu_metrics = False
        vllm_config.observability_config.cudagraph_metrics = False
        vllm_config.kv_transfer_config = None
        vllm_config.ec_transfer_config = None
        vllm_config.lora_config = None
        vllm_config.speculative_config = speculative
        if speculative is not None:
            speculative.num_speculative_tokens = 2
            speculative.method = "mtp"
        return vllm_config

    PrometheusStatLogger(config(None), [0])
    plain = registry_metrics(before, lambda: None)
    PrometheusStatLogger(config(mock.MagicMock()), [0])  # unregisters vLLM's metrics first, then makes them again
    with_spec = registry_metrics(before, lambda: None)
    spec_only = sorted({m["name"] for m in with_spec} - {m["name"] for m in plain})
    return with_spec, spec_only


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine", choices=["sglang", "vllm"])
    ap.add_argument("--lines", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    started = time.monotonic()
    lines = json.loads(open(args.lines).read())
    body = sglang_contract(lines) if args.engine == "sglang" else vllm_contract(lines)
    contract = {"engine": args.engine, "version": importlib.metadata.version(args.engine),
                "recorded": datetime.date.today().isoformat(), "python": sys.version.split()[0],
                "torch": _version("torch"), "seconds": round(time.monotonic() - started, 1), **body}
    with open(args.out, "w") as out:
        json.dump(contract, out, indent=1, sort_keys=True)
        out.write("\n")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
