"""A simulated engine: the API shapes of llama.cpp, SGLang and vLLM, and their faults, on a CPU.

This is a test double. It lets servebook's GPU-engine paths (flags, readiness, counter
semantics, failure classification) run where no GPU exists, and it injects the faults a real
qualification must catch. Its numbers come from a timing model, never from a model: runs made
with it carry `simulator` in their candidate identity and are never the demo.

Usage (the engine's own argv after `--`, which configures the timing model):

    python -m servebook.simulator --flavor sglang [--fault crash_mid_stream] -- \\
        sglang serve --port 30000 --max-running-requests 4 --enable-metrics ...
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from .app import build_app
from .config import FAULTS, FLAVORS, SimConfig, parse_engine_argv
from .engine import Engine, log, tokenize

#: the poller spins on its own and checks now and then whether the engine that started it is still there
_POLLER = """
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(200_000):
        pass
"""


def _start_poller() -> None:
    """A scheduler that polls: a child process of the engine (so a pin of the engine's tree holds it too) that keeps
    one core busy until the engine ends (SGLang 0.5.17's idle engines did, about a core each, 2026-12-06)."""
    import os
    import subprocess

    subprocess.Popen([sys.executable, "-c", _POLLER, str(os.getpid())], stdin=subprocess.DEVNULL)
    log("scheduler polls while idle (fault idle_poll)")


async def serve(config: SimConfig) -> None:
    import uvicorn

    engine = Engine(config)
    log(f"simulated {config.flavor} engine (servebook simulator, not a real engine): model {config.model}, "
        f"{config.timing.slots} slots, chunk {config.timing.chunk}, draft tokens {config.timing.draft_tokens}")
    # As vLLM and SGLang do at startup: every argument, secrets included (servebook must scrub them).
    log(f"server args: {config.server_args!r}")
    if "oom_warmup" in config.faults:
        await asyncio.sleep(config.load_s)
        message = {"llamacpp": "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 81920.00 MiB on device 0: "
                               "cudaMalloc failed: out of memory",
                   "sglang": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB during warmup",
                   "vllm": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}[config.flavor]
        log(message)
        sys.exit(1)

    async def become_ready() -> None:
        if "never_ready" in config.faults:
            return
        await asyncio.sleep(config.load_s)
        if config.flavor == "sglang":
            # SGLang sends itself a warmup request after loading; it lands in the counters.
            log("Start of warmup request")
            async for _ in engine.generate(tokenize("The capital city of France is"), 8, True, 0):
                pass
            await asyncio.sleep(config.warmup_s)
            log("End of warmup request")
        engine.ready = True
        log("ready to serve")

    if "idle_poll" in config.faults:
        _start_poller()
    server = uvicorn.Server(uvicorn.Config(build_app(engine), host=config.host, port=config.port,
                                           log_level="warning", access_log=False))
    if config.flavor == "vllm":
        # vLLM opens its port only once the engine is ready: connections are refused before.
        if "never_ready" in config.faults:
            while True:
                await asyncio.sleep(3600)
        await asyncio.sleep(config.load_s)
        engine.ready = True
        log("Application startup complete.")
        await server.serve()
        return
    ready_task = asyncio.ensure_future(become_ready())
    await server.serve()
    ready_task.cancel()


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    engine_argv: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, engine_argv = argv[:split], argv[split + 1:]
    parser = argparse.ArgumentParser(prog="servebook sim", description=__doc__.splitlines()[0])
    parser.add_argument("--flavor", choices=FLAVORS, required=True)
    parser.add_argument("--fault", action="append", choices=FAULTS, default=[])
    parser.add_argument("--port", type=int, help="when no engine argv follows --")
    args = parser.parse_args(argv)
    if not engine_argv:
        engine_argv = ["--port", str(args.port or {"llamacpp": 8080, "sglang": 30000, "vllm": 8000}[args.flavor])]
        if args.flavor == "sglang":
            engine_argv.append("--enable-metrics")
        if args.flavor == "llamacpp":
            engine_argv.append("--metrics")
    config = parse_engine_argv(args.flavor, engine_argv, set(args.fault))
    try:
        asyncio.run(serve(config))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
