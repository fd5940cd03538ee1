import shutil

import pytest

from servebook.engines import llamacpp_build as engine_install
from servebook.engines.llamacpp_build import EngineInstallError, LlamaCppInstall, install_llamacpp


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
