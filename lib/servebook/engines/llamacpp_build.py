"""Building and caching the embedded default engine: llama.cpp's `llama-server`.

The llama-cpp-python sdist on PyPI carries the whole llama.cpp tree, so the only registry we
need is PyPI (or a llama.cpp source tree or tarball given with `source`, for hosts without any
network). We build just the server target and keep it (plus the vocab-only GGUFs and chat
templates the random models are made from) under the cache, keyed by version and backend: the
CPU build in `llamacpp/<version>/`, the CUDA build beside it in `llamacpp/<version>-cuda/`, built
for the compute capability nvidia-smi reports. A file lock makes two concurrent installs wait for
each other instead of building twice or half-writing.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from ..util.errors import ServebookError
from ..util.paths import cache_root
from ..util.progress import Reporter

LLAMACPP_PYTHON_VERSION = "0.3.36"
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    # A static binary survives being copied out of the build tree into the cache.
    "-DBUILD_SHARED_LIBS=OFF",
)


BACKENDS = ("cpu", "cuda")


def cuda_architectures(nvidia_smi_csv: str) -> str:
    """CMake's CUDA architectures from `nvidia-smi --query-gpu=compute_cap --format=csv,noheader`: '9.0' -> '90'."""
    caps = sorted({line.strip().replace(".", "") for line in nvidia_smi_csv.splitlines() if line.strip()})
    if not caps or not all(c.isdigit() for c in caps):
        raise EngineInstallError(f"cannot read the GPUs' compute capability from nvidia-smi: {nvidia_smi_csv!r}")
    return ";".join(caps)


#: llama.cpp 0c1e570 (the 0.3.36 sdist) built natively on a CPU with AMX (Sapphire Rapids and later) uses AMX
#: tiles for quantized weights, and crashed (SIGSEGV, right after its threadpool starts) loading Gemma 3 270M Q4_K_M
#: on the 2-core CI machines, whose CPU reports amx_int8 under a hypervisor. The same build with `--no-repack` (no
#: extra buffer types), or one without AMX (`-mno-amx-*`; AVX-512 and weight repacking kept), serves it; one
#: without weight repacking alone still crashed. So a native build leaves AMX out where the CPU has it.
AMX_CPU_FLAG = "amx_int8"
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"


@functools.cache
def host_cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags as Linux lists them (empty where there is no /proc/cpuinfo). Read once a process:
    every look-up of the cached build asks, several a run, and /proc/cpuinfo is slow to read on a host of many
    cores."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return frozenset(line.partition(":")[2].split())


def workaround_flags(cpu_flags: frozenset[str]) -> list[str]:
    """The flags a native build needs on this CPU to steer clear of a known crash (see AMX_CPU_FLAG). GCC and
    Clang let an explicit -mno-* win over what -march=native turns on, wherever it stands on the line."""
    return [f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}"] if AMX_CPU_FLAG in cpu_flags else []


def cmake_flags(backend: str, architectures: str | None = None,
                cpu_flags: frozenset[str] | None = None) -> list[str]:
    flags = list(CMAKE_FLAGS) + workaround_flags(host_cpu_flags() if cpu_flags is None else cpu_flags)
    if backend == "cuda":
        flags += ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={architectures}"]
    return flags


def _gpu_architectures() -> str:
    if not shutil.which("nvidia-smi"):
        raise EngineInstallError("a CUDA build needs a GPU: nvidia-smi is not on PATH")
    out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                         text=True, timeout=60)
    return cuda_architectures(out.stdout)


def _gpu_visible() -> bool:
    """An NVIDIA GPU this process could use (the driver's device nodes, or its tools on PATH)."""
    return Path("/dev/nvidiactl").exists() or bool(shutil.which("nvidia-smi"))


def default_backend() -> str:
    """cuda where nvcc and a GPU are both there, else cpu."""
    return "cuda" if shutil.which("nvcc") and shutil.which("nvidia-smi") else "cpu"


class EngineInstallError(ServebookError, RuntimeError):
    """The engine could not be built; the message says what is missing and how to fix it."""


@dataclass(frozen=True)
class LlamaCppInstall:
    root: Path

    @property
    def server(self) -> Path:
        return self.root / "bin" / "llama-server"

    @property
    def vocab_dir(self) -> Path:
        return self.root / "share" / "vocab"

    @property
    def templates_dir(self) -> Path:
        return self.root / "share" / "templates"

    @property
    def info(self) -> dict:
        return json.loads((self.root / "install.json").read_text())

    @property
    def version(self) -> str:
        return self.info["llama_cpp_python_version"]

    @property
    def backend(self) -> str:
        return self.info.get("backend", "cpu")

    def is_complete(self) -> bool:
        return (self.root / "install.json").is_file() and self.server.is_file()

    def lacks_workarounds(self, cpu_flags: frozenset[str] | None = None) -> list[str]:
        """The crash workarounds this CPU needs that the build was made without (a cache from before them)."""
        needed = workaround_flags(host_cpu_flags() if cpu_flags is None else cpu_flags)
        return [flag for flag in needed if flag not in (self.info.get("cmake_flags") or [])]

    def is_usable(self) -> bool:
        return self.is_complete() and not self.lacks_workarounds()


def llamacpp_install_dir(version: str = LLAMACPP_PYTHON_VERSION, backend: str = "cpu") -> Path:
    return cache_root() / "llamacpp" / (version if backend == "cpu" else f"{version}-{backend}")


def find_llamacpp(version: str = LLAMACPP_PYTHON_VERSION, backend: str | None = None) -> LlamaCppInstall | None:
    """The cached install of this version, or None. Without `backend` (or SERVEBOOK_LLAMACPP_BACKEND): the CUDA
    build where one is cached and a GPU is visible (or no CPU build is), else the CPU build.
    SERVEBOOK_LLAMA_SERVER_DIR points at another build."""
    override = os.environ.get("SERVEBOOK_LLAMA_SERVER_DIR")
    if override:
        install = LlamaCppInstall(Path(override))
        return install if install.is_complete() else None
    backend = backend or os.environ.get("SERVEBOOK_LLAMACPP_BACKEND")
    if backend is None:
        cuda = LlamaCppInstall(llamacpp_install_dir(version, "cuda"))
        cpu = LlamaCppInstall(llamacpp_install_dir(version, "cpu"))
        if cuda.is_usable() and (not cpu.is_usable() or _gpu_visible()):
            return cuda
        backend = "cpu"
    install = LlamaCppInstall(llamacpp_install_dir(version, backend))
    # a cached build without a workaround this CPU needs is rebuilt by install_llamacpp, not served
    return install if install.is_usable() else None


def _require_build_tools() -> dict[str, str]:
    tools = {"cmake": shutil.which("cmake")}
    tools["c++"] = next(
        (p for p in (shutil.which(c) for c in ("c++", "g++", "clang++")) if p), None
    )
    tools["cc"] = next((p for p in (shutil.which(c) for c in ("cc", "gcc", "clang")) if p), None)
    missing = [name for name, path in tools.items() if path is None]
    if missing:
        raise EngineInstallError(
            f"cannot build llama-server: {', '.join(missing)} not found on PATH. "
            "Install a C/C++ toolchain and CMake (Debian: apt-get install build-essential cmake), "
            "then run `servebook engine install llamacpp` again."
        )
    return {k: v for k, v in tools.items() if v}


def _run_logged(argv: list[str], log, cwd: Path | None = None, on_line=None) -> None:
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    proc = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        log.write(line)
        tail = (tail + [line.rstrip()])[-15:]
        if on_line:
            on_line(line)
    if proc.wait() != 0:
        raise EngineInstallError(
            f"`{' '.join(argv[:3])} ...` failed (exit {proc.returncode}); full log in {log.name}. "
            "Last lines:\n" + "\n".join(tail)
        )


def install_llamacpp(
    version: str = LLAMACPP_PYTHON_VERSION,
    *,
    reporter: Reporter | None = None,
    force: bool = False,
    backend: str = "cpu",
    source: str | Path | None = None,
) -> LlamaCppInstall:
    """Build llama-server from the pinned sdist (or `source`: a llama.cpp tree or .tar.gz of one, which
    SERVEBOOK_LLAMACPP_SOURCE also gives) into the cache; return the cached install.

    Idempotent: a complete install is returned untouched unless `force`, or unless it was built without a crash
    workaround this CPU needs (`LlamaCppInstall.lacks_workarounds`).
    """
    if backend not in BACKENDS:
        raise EngineInstallError(f"backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    reporter = reporter or Reporter(quiet=True)
    source = source or os.environ.get("SERVEBOOK_LLAMACPP_SOURCE")
    root = llamacpp_install_dir(version, backend)
    root.parent.mkdir(parents=True, exist_ok=True)
    install = LlamaCppInstall(root)
    if install.is_usable() and not force:
        return install
    if install.is_complete() and not force:
        reporter.log(f"rebuilding llama-server in {root}: built without {', '.join(install.lacks_workarounds())}, "
                     "which this CPU needs (see llamacpp_build.AMX_CPU_FLAG)")
    with FileLock(str(root.parent / f".{version}.lock")):
        # Another process may have finished the build while we waited for the lock.
        if install.is_usable() and not force:
            return install
        tools = _require_build_tools()
        flags = cmake_flags(backend, _gpu_architectures() if backend == "cuda" else None)
        if backend == "cuda" and not shutil.which("nvcc"):
            raise EngineInstallError("a CUDA build needs nvcc (the CUDA toolkit) on PATH")
        staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=root.parent))
        staging.chmod(0o755)
        try:
            _build_into(staging, version, tools, reporter, flags, backend, Path(source) if source else None)
            if root.exists():
                shutil.rmtree(root)
            os.replace(staging, root)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    reporter.log(f"llama-server {version} ({backend}) installed in {root}")
    return install


def _fetch_source(work: Path, version: str, given: Path | None, log, reporter: Reporter) -> Path:
    """The llama.cpp tree to build: the sdist's vendored copy from PyPI, or the tree or tarball given."""
    if given is not None and given.is_dir():
        return given
    if given is not None:
        with tarfile.open(given) as tar:
            tar.extractall(work, filter="data")
        found = [p.parent for p in work.glob("**/CMakeLists.txt") if (p.parent / "tools" / "server").is_dir()]
        if not found:
            raise EngineInstallError(f"{given} holds no llama.cpp tree (no tools/server beside a CMakeLists.txt)")
        return min(found, key=lambda p: len(p.parts))
    with reporter.task(f"download llama-cpp-python=={version} sdist from PyPI") as task:
        _run_logged([sys.executable, "-m", "pip", "download", f"llama-cpp-python=={version}",
                     "--no-deps", "--no-binary", ":all:", "--dest", str(work), "--quiet"], log)
        task.update(1)
    sdists = list(work.glob("llama_cpp_python-*.tar.gz"))
    if not sdists:
        raise EngineInstallError(f"pip did not produce an sdist in {work}; see {log.name}")
    with tarfile.open(sdists[0]) as tar:
        tar.extractall(work, filter="data")
    return next(work.glob("llama_cpp_python-*/vendor/llama.cpp"))


def _build_into(staging: Path, version: str, tools: dict[str, str], reporter: Reporter, flags: list[str],
                backend: str, given: Path | None) -> None:
    work = staging / "work"
    work.mkdir()
    started = time.time()
    with open(staging / "build.log", "w") as log:
        source = _fetch_source(work, version, given, log, reporter)
        build_dir = work / "build"
        _run_logged(["cmake", "-S", str(source), "-B", str(build_dir), *flags], log)
        jobs = str(os.cpu_count() or 2)
        percent = re.compile(r"^\[\s*(\d+)%\]")
        with reporter.task(f"build llama-server, {backend} (about 8 minutes on 2 cores)", total=100,
                           unit="%") as task:
            def on_line(line: str) -> None:
                match = percent.match(line)
                if match:
                    task.update(float(match.group(1)))

            _run_logged(
                ["cmake", "--build", str(build_dir), "--target", "llama-server", "-j", jobs],
                log,
                on_line=on_line,
            )
        built = build_dir / "bin" / "llama-server"
        (staging / "bin").mkdir()
        shutil.copy2(built, staging / "bin" / "llama-server")
        vocab = staging / "share" / "vocab"
        vocab.mkdir(parents=True)
        for gguf in (source / "models").glob("ggml-vocab-*.gguf"):
            shutil.copy2(gguf, vocab / gguf.name)
        shutil.copytree(source / "models" / "templates", staging / "share" / "templates")
        commit = _vendored_commit(build_dir)
    shutil.rmtree(work)
    info = {
        "engine": "llamacpp",
        "backend": backend,
        "llama_cpp_python_version": version,
        "llama_cpp_commit": commit,
        "cmake_flags": flags,
        "compiler": tools.get("c++"),
        "machine": platform.machine(),
        "build_seconds": round(time.time() - started, 1),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (staging / "install.json").write_text(json.dumps(info, indent=2))


def _vendored_commit(build_dir: Path) -> str | None:
    """The llama.cpp commit the sdist vendors, when its build info says so."""
    for candidate in (build_dir / "common" / "build-info.cpp",):
        if candidate.is_file():
            match = re.search(r'LLAMA_COMMIT\s*=\s*"([^"]+)"', candidate.read_text())
            if match and match.group(1) != "unknown":
                return match.group(1)
    return None
