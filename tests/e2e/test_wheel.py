"""A wheel built from the repository, installed into a fresh virtual environment outside it, runs the tiny model
end to end and builds the site (issue 31, item 7): what the library reads at run time ships as package data.

The wheel is built from a copy of what a build reads (pyproject.toml, README.md, lib/), so the build leaves nothing
in the checkout, and installed with its declared dependencies from the package index pip is configured with (about
30 s from the local index here): a dependency the library imports but pyproject.toml does not declare fails here
too. Nothing of the checkout is importable in that environment, so a read of the repository's data/ or
notebooks/ by the library fails these tests."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from servebook.journal import Journal

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 300

CANDIDATE = """name: wheel-tiny
engine: llamacpp
model: {path: "tiny:target"}
knobs: {chunk_size: 256, max_running_requests: 2, context_length: 4096}
"""
PLAN = """decode: {concurrency: [1, 2], categories: [prose, code], output_tokens: 16, rounds: 1}
prefill: {prompt_tokens: [256], requests: 1}
warmup_requests: 1
max_foreign_cpu_cores: 4
"""


def _pip(*args: str, cwd: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, cwd=cwd,
                            timeout=TIMEOUT)
    assert result.returncode == 0, f"pip {args} exited {result.returncode}\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh virtual environment, outside the repository, with servebook installed from a freshly built wheel."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "lib", source / "lib", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    _pip("wheel", "--no-deps", "--no-build-isolation", "--quiet", "--wheel-dir", str(root / "dist"), str(source),
         cwd=root)
    [wheel] = (root / "dist").glob("servebook-*.whl")
    env = root / "venv"
    # without a pip of its own: this environment's pip installs into it (--python), which saves ensurepip's time
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=TIMEOUT)
    _pip("--python", str(env / "bin" / "python"), "install", "--quiet", str(wheel), cwd=root)
    return env


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    """A working directory with nothing of the repository in it or above it."""
    folder = tmp_path / "work"
    folder.mkdir()
    assert not any((parent / "pyproject.toml").exists() for parent in [folder, *folder.parents])
    return folder


def installed(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    environ = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environ.update({"SERVEBOOK_PLAIN_PROGRESS": "1", "COLUMNS": "160",
                    "PATH": f"{venv / 'bin'}{os.pathsep}{environ.get('PATH', '')}"})
    result = subprocess.run(list(args), capture_output=True, text=True, cwd=cwd, env=environ, timeout=TIMEOUT)
    assert result.returncode == 0, f"{args} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def test_servebook_comes_from_the_wheel_with_what_it_reads(venv, elsewhere):
    probe = ("import json, servebook\n"
             "from servebook.engines.contracts import recorded_contracts\n"
             "from servebook.measure.prompts import corpus\n"
             "from servebook.sweeps import QUALIFY_NOTEBOOK\n"
             "from servebook.util.paths import project_root\n"
             "defaults = [servebook.load_candidate('data/candidates/tiny-llamacpp.yaml').name,\n"
             "            servebook.load_plan('data/plans/quick.yaml').name]  # what the notebook names\n"
             "print(json.dumps({'package': servebook.__file__, 'notebook': str(QUALIFY_NOTEBOOK),\n"
             "    'root': project_root() and str(project_root()), 'passages': len(corpus('prose')),\n"
             "    'contracts': len(recorded_contracts()), 'defaults': defaults}))")
    found = json.loads(installed(venv, str(venv / "bin" / "python"), "-c", probe, cwd=elsewhere).stdout)
    assert Path(found["package"]).is_relative_to(venv), found
    assert Path(found["notebook"]).is_relative_to(venv) and Path(found["notebook"]).is_file(), found
    assert found["root"] is None, "an installed servebook has no project root to fall back to"
    assert found["passages"] > 0 and found["contracts"] > 0
    assert found["defaults"] == ["tiny-baseline", "quick"]


def test_the_installed_wheel_runs_the_tiny_model_and_builds_the_site(llama_install, venv, elsewhere):
    (elsewhere / "candidate.yaml").write_text(CANDIDATE)
    (elsewhere / "plan.yaml").write_text(PLAN)
    servebook = str(venv / "bin" / "servebook")
    installed(venv, servebook, "run", "candidate.yaml", "--plan", "plan.yaml", "--journal", "journal",
              cwd=elsewhere)
    [record] = Journal(elsewhere / "journal").runs()
    assert record.status == "completed" and (record.dir / "manifest.json").is_file()
    # every cell measured (decode: 2 categories x 2 concurrencies; prefill: 1 size); whether the shared host let
    # each stay valid is other tests' business
    assert len(record.table("cells")) == 5

    installed(venv, servebook, "site", "--journal", "journal", "--out", "site", cwd=elsewhere)
    index = elsewhere / "site" / "index.html"
    assert index.is_file() and record.run_id in index.read_text()
    assert (elsewhere / "site" / "runs" / f"{record.run_id}.html").is_file()


def test_the_installed_wheel_sweeps_through_its_own_notebook(llama_install, venv, elsewhere):
    """`servebook sweep` executes the qualify notebook the wheel ships (with papermill, in a kernel of the new
    environment) and stores the executed copy in the run."""
    (elsewhere / "study.yaml").write_text(
        "name: wheel-study\nbase:\n" + "".join(f"  {line}\n" for line in CANDIDATE.splitlines())
        + "plan:\n" + "".join(f"  {line}\n" for line in PLAN.splitlines()))
    installed(venv, str(venv / "bin" / "servebook"), "sweep", "study.yaml", "--journal", "journal", cwd=elsewhere)
    [record] = Journal(elsewhere / "journal").runs()
    assert record.status == "completed" and record.manifest.study == "wheel-study"
    executed = json.loads(record.notebook_path.read_text())
    assert Path(executed["metadata"]["papermill"]["input_path"]).is_relative_to(venv)
