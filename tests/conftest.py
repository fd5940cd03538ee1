import os

import pytest

# Progress goes to plain log lines in tests, whatever the terminal.
os.environ.setdefault("SERVEBOOK_PLAIN_PROGRESS", "1")


@pytest.fixture(scope="session")
def llama_install():
    """The real llama-server build (built once and cached; `make test` builds it before pytest)."""
    from servebook.engines.llamacpp_build import find_llamacpp, install_llamacpp
    from servebook.engines.tiny_models import ensure_tiny_models

    install = find_llamacpp() or install_llamacpp()
    ensure_tiny_models(install)
    return install
