import json
import shutil

import pytest

from servebook.engines import llamacpp_build as engine_install
from servebook.engines.llamacpp_build import (
    EngineInstallError,
    LlamaCppInstall,
    cmake_flags,
    find_llamacpp,
    host_cpu_flags,
    install_llamacpp,
)

AVX2_ONLY = frozenset({"sse4_2", "avx", "avx2", "fma", "f16c"})
#: /proc/cpuinfo's flags line on the 2-core CI machines (shortened), whose native build crashed in AMX code
CI_CPUINFO = ("processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma f16c avx512f avx512dq avx512bw avx512vl "
              "avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8\nbugs\t\t: spectre_v1\n")
NO_AMX = ["-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16",
          "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"]


def test_missing_toolchain_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEBOOK_CACHE", str(tmp_path))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(EngineInstallError) as exc:
        install_llamacpp(version="0.0.0-test")
    message = str(exc.value)
    assert "cmake" in message and "c++" in message and "apt-get install build-essential cmake" in message
    assert not (tmp_path / "llamacpp" / "0.0.0-test").exists()


def test_a_complete_install_is_reused_without_building(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEBOOK_CACHE", str(tmp_path))
    monkeypatch.setattr(engine_install, "host_cpu_flags", lambda: AVX2_ONLY)
    root = tmp_path / "llamacpp" / "9.9.9"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "llama-server").write_text("#!/bin/sh\n")
    (root / "install.json").write_text('{"llama_cpp_python_version": "9.9.9"}')

    def no_build(*args, **kwargs):
        raise AssertionError("must not build when the cache is complete")

    monkeypatch.setattr(engine_install, "_build_into", no_build)
    install = install_llamacpp(version="9.9.9")
    assert install == LlamaCppInstall(root) and install.version == "9.9.9"


def test_a_half_written_install_is_not_complete(tmp_path):
    root = tmp_path / "x"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "llama-server").write_text("")
    assert not LlamaCppInstall(root).is_complete()  # no install.json: the build never finished


def test_a_cpu_with_amx_builds_without_it(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(CI_CPUINFO)
    flags = host_cpu_flags(cpuinfo)
    assert {"avx2", "avx512f", "amx_int8"} <= flags and "spectre_v1" not in flags
    assert set(NO_AMX) <= set(cmake_flags("cpu", cpu_flags=flags))
    assert set(NO_AMX) <= set(cmake_flags("cuda", "90", cpu_flags=flags))  # the CPU half of a CUDA build too
    assert not any("amx" in f for f in cmake_flags("cpu", cpu_flags=AVX2_ONLY))
    assert not any("amx" in f for f in cmake_flags("cpu", cpu_flags=flags - {"amx_int8"}))
    assert host_cpu_flags(tmp_path / "missing") == frozenset()  # not Linux: no workaround guessed


def test_a_cached_build_without_the_workaround_this_cpu_needs_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEBOOK_CACHE", str(tmp_path))
    monkeypatch.setattr(engine_install, "host_cpu_flags", lambda: host_cpu_flags(cpuinfo))
    monkeypatch.setattr(engine_install, "_require_build_tools", lambda: {})
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(CI_CPUINFO)
    root = tmp_path / "llamacpp" / "9.9.9"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "llama-server").write_text("#!/bin/sh\n")
    before = cmake_flags("cpu", cpu_flags=AVX2_ONLY)
    (root / "install.json").write_text(json.dumps({"llama_cpp_python_version": "9.9.9", "cmake_flags": before}))
    stale = LlamaCppInstall(root)
    assert stale.is_complete() and stale.lacks_workarounds() == NO_AMX
    assert find_llamacpp("9.9.9", "cpu") is None  # not served: the test session would build it again
    built = []

    def build(staging, version, tools, reporter, flags, *rest):
        built.append(flags)
        (staging / "bin").mkdir()
        (staging / "bin" / "llama-server").write_text("#!/bin/sh\n")
        (staging / "install.json").write_text(json.dumps({"llama_cpp_python_version": version, "cmake_flags": flags}))

    monkeypatch.setattr(engine_install, "_build_into", build)
    install = install_llamacpp(version="9.9.9")
    assert built and set(NO_AMX) <= set(built[0])
    assert install.is_usable() and find_llamacpp("9.9.9", "cpu") == install
    install_llamacpp(version="9.9.9")
    assert len(built) == 1  # the rebuilt install is kept
