"""CUDA builds of llama.cpp and realistic random models, from recorded nvidia-smi output (CI has no GPU)."""

import json

import pytest

from servebook.engines import get_engine, llamacpp_build
from servebook.engines.llamacpp_build import EngineInstallError, LlamaCppInstall, cmake_flags, cuda_architectures
from servebook.models.random_models import RANDOM_MODELS, custom_spec, generated_spec
from tests.helpers.candidates import make_candidate

H200_COMPUTE_CAP = "9.0\n"  # nvidia-smi --query-gpu=compute_cap --format=csv,noheader on an H200


def test_cuda_flags_target_the_gpus_compute_capability():
    assert cuda_architectures(H200_COMPUTE_CAP) == "90"
    assert cuda_architectures("8.9\n9.0\n9.0\n") == "89;90"
    flags = cmake_flags("cuda", "90")
    assert "-DGGML_CUDA=ON" in flags and "-DCMAKE_CUDA_ARCHITECTURES=90" in flags
    assert "-DGGML_CUDA=ON" not in cmake_flags("cpu")
    with pytest.raises(EngineInstallError, match="compute capability"):
        cuda_architectures("No devices were found\n")


def fake_install(tmp_path, backend):
    root = tmp_path / backend
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "bin" / "llama-server").write_text("")
    (root / "install.json").write_text(json.dumps({"backend": backend, "llama_cpp_python_version": "0.3.36",
                                                   "cmake_flags": cmake_flags(backend, "90")}))
    return LlamaCppInstall(root)


def test_every_layer_goes_to_the_gpu_on_a_cuda_build_unless_the_knob_says(tmp_path, monkeypatch):
    adapter = get_engine("llamacpp")
    monkeypatch.setattr(llamacpp_build, "find_llamacpp", lambda *a, **k: fake_install(tmp_path, "cuda"))
    assert adapter.backend() == "cuda"
    argv = adapter.argv(make_candidate(), port=8080, model_path="m.gguf", draft_path=None, backend="cuda")
    assert argv[argv.index("-ngl") + 1] == "999"
    argv = adapter.argv(make_candidate(knobs={"gpu_layers": 10}), port=8080, model_path="m.gguf", draft_path=None,
                        backend="cuda")
    assert argv[argv.index("-ngl") + 1] == "10"
    assert adapter.uses_gpus(make_candidate()) and not adapter.uses_gpus(make_candidate(knobs={"gpu_layers": 0}))
    assert adapter.build_fingerprint(make_candidate()) == {"engine_backend": "cuda", "engine_cuda_architectures": "90"}
    monkeypatch.setattr(llamacpp_build, "find_llamacpp", lambda *a, **k: fake_install(tmp_path, "cpu"))
    assert adapter.backend() == "cpu"
    assert "-ngl" not in adapter.argv(make_candidate(), port=8080, model_path="m.gguf", draft_path=None,
                                      backend="cpu")
    assert not adapter.uses_gpus(make_candidate())


def test_argv_is_pure_what_is_cached_does_not_change_it(tmp_path, monkeypatch):
    """A dry run prints the same line whatever build happens to be cached: argv never looks it up."""
    adapter = get_engine("llamacpp")
    lines = []
    for backend in ("cuda", "cpu"):
        monkeypatch.setattr(llamacpp_build, "find_llamacpp", lambda *a, b=backend, **k: fake_install(tmp_path, b))
        lines.append(adapter.argv(make_candidate(), port=8080, model_path="m.gguf", draft_path=None))
    assert lines[0] == lines[1] and "-ngl" not in lines[0] and lines[0][0] == "llama-server"


def test_gpu_layers_is_llamacpp_only_and_owns_its_flag():
    with pytest.raises(ValueError, match="gpu_layers is a llama.cpp setting"):
        make_candidate("vllm", knobs={"gpu_layers": 10})
    with pytest.raises(ValueError, match="-ngl conflicts with knobs.gpu_layers"):
        make_candidate(extra_args=["-ngl", "99"])


def test_presets_have_the_sizes_they_are_named_for():
    billions = {name: spec.parameters() / 1e9 for name, spec in RANDOM_MODELS.items()}
    assert 0.4 < billions["0.5b"] < 0.65 and 1.0 < billions["1b"] < 1.6
    assert 2.8 < billions["3b"] < 3.6 and 7.0 < billions["8b"] < 8.5
    # KV bytes per token: layers x KV heads x head dim x 2 (K and V) x 2 bytes (f16)
    assert RANDOM_MODELS["1b"].kv_bytes_per_token() == 16 * 8 * 64 * 2 * 2


def test_model_references_name_their_choices():
    assert generated_spec("random:1b") is RANDOM_MODELS["1b"]
    assert generated_spec("tiny:target").family == "tiny"
    assert generated_spec("/models/x.gguf") is None
    with pytest.raises(KeyError, match="random:0.5b"):
        generated_spec("random:70b")
    with pytest.raises(ValueError, match="divide"):
        custom_spec("odd", layers=2, width=100, heads=3, kv_heads=1, ffn=256)
