"""The journal under hostile conditions, through the real command: planted secrets, two writers at once,
and `kill -9` of a sweep at random moments. Simulated engines (loopback only), so each sweep is seconds."""

import random
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

from servebook.journal import Journal
from tests.helpers.cli import cli_env
from tests.helpers.cli import servebook as run_cli
from tests.helpers.processes import alive, descendants

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-planted-4be1c09d7e2f"
HF = "hf_plantedtoken0123456789"
ENV = cli_env(PLANT_KEY=KEY, HF_TOKEN=HF)

STUDY = """
name: NAME
base:
  engine: sglang
  model: {id: org/model, revision: abc123}
  knobs: {max_running_requests: 4}
  launch: {simulator: true, ready_timeout_s: 20, api_key_env: PLANT_KEY}
variants:
  - {name: two-slots, set: {knobs.max_running_requests: 2}}
plan:
  decode: {concurrency: [1, 2], categories: [prose], output_tokens: 16, rounds: 1}
  prefill: {prompt_tokens: [256], requests: 1}
  warmup_requests: 1
  max_foreign_cpu_cores: 8
"""


servebook = partial(run_cli, env=ENV)


def study_file(tmp_path, name="safety", text=STUDY) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace("NAME", name))
    return path


def files_holding(root: Path, secret: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_a_planted_key_reaches_no_byte_of_the_journal_or_the_site(tmp_path):
    journal, site = tmp_path / "journal", tmp_path / "site"
    # A literal key is refused at load, and the message points to api_key_env without echoing the key.
    literal = STUDY.replace("variants:", f"variants:\n  - {{name: literal, set: {{extra_args: [--api-key, {KEY}]}}}}")
    refused = servebook("sweep", study_file(tmp_path, "literal", literal), "--journal", journal, check=False)
    assert refused.returncode == 2 and "api_key_env" in refused.stderr and KEY not in refused.stderr
    # Routes a key takes in a real run: the engine's argv, SGLang's server info (it reports api_key), the
    # engine log (the simulator prints its server args as SGLang and vLLM do), the notebook's parameters.
    servebook("sweep", study_file(tmp_path), "--journal", journal)
    servebook("site", "--journal", journal, "--out", site)
    runs = Journal(journal).runs()
    assert {r.status for r in runs} == {"completed"} and len(runs) == 2
    server_info = (runs[0].dir / "server_info.json").read_text()
    assert '"api_key": "***"' in server_info
    assert "server args" in (runs[0].dir / "engine.log").read_text()  # the route was taken, and scrubbed
    assert all((r.dir / "notebook.ipynb").is_file() for r in runs)
    assert files_holding(journal, KEY) == [] and files_holding(site, KEY) == []
    assert files_holding(journal, HF) == [] and files_holding(site, HF) == []


def test_two_sweeps_writing_one_journal_lose_and_corrupt_nothing(tmp_path):
    journal = tmp_path / "journal"
    sweeps = [subprocess.Popen([sys.executable, "-m", "servebook.cli", "sweep", study_file(tmp_path, name),
                                "--journal", journal], env=ENV, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True) for name in ("writer-a", "writer-b")]
    for process in sweeps:
        output, _ = process.communicate(timeout=300)
        assert process.returncode == 0, output
    runs = Journal(journal).runs()
    assert len(runs) == 4 and {r.status for r in runs} == {"completed"}
    assert sorted(r.manifest.study for r in runs) == ["writer-a", "writer-a", "writer-b", "writer-b"]
    for record in runs:
        assert record.table("cells") is not None and len(record.table("cells")) == 3
        assert (record.dir / "notebook.ipynb").is_file()
    (journal / "index.parquet").unlink()
    assert len(Journal(journal).index()) == 4  # the index is derived, and rebuilt from the manifests


def _measuring(journal: Path) -> bool:
    runs = journal / "runs"
    return runs.is_dir() and any((r / "cells.parquet").is_file() and not (r / "manifest.json").exists()
                                 for r in runs.iterdir())


def _sealed(journal: Path) -> dict[str, bytes]:
    """Every file of every sealed run, by path: a sealed run must never lose or change one."""
    if not (journal / "runs").is_dir():
        return {}
    return {str(p): p.read_bytes() for run in (journal / "runs").iterdir() if (run / "manifest.json").is_file()
            for p in run.rglob("*") if p.is_file()}


@pytest.mark.timeout(600)
def test_kill_9_of_a_sweep_loses_no_sealed_run_and_leaves_nothing_running(tmp_path):
    journal = tmp_path / "journal"
    study = study_file(tmp_path, "killed", STUDY.replace("rounds: 1", "rounds: 1, min_cell_s: 1.5")
                       .replace("plan:", "repeats: 2\nplan:"))
    rng = random.Random(7)
    before: dict[str, bytes] = {}
    for attempt in range(3):
        process = subprocess.Popen([sys.executable, "-m", "servebook.cli", "sweep", study, "--journal", journal],
                                   env=ENV, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # The first kill lands mid-measurement (a cell finished, the run not sealed); the others at random.
        deadline = time.monotonic() + (120 if attempt == 0 else rng.uniform(4, 14))
        tree: set[int] = set()
        while time.monotonic() < deadline and process.poll() is None:
            tree |= descendants(process.pid)  # the kernel and the engine it started
            if attempt == 0 and _measuring(journal):
                break
            time.sleep(0.2)
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        # The kernel polls for its parent and the engine dies with the kernel: give them a few seconds.
        for _ in range(50):
            if not alive(tree):
                break
            time.sleep(0.2)
        assert alive(tree) == set(), f"left running after kill -9 (attempt {attempt})"
        after = _sealed(journal)
        assert {k: v for k, v in after.items() if k in before} == before  # nothing sealed lost or changed
        before = after
    incomplete = [r for r in Journal(journal).runs() if r.status == "incomplete"]
    assert any(r.table("cells") is not None for r in incomplete)  # the mid-measurement kill kept its cells
    for record in incomplete:
        cells = record.table("cells")
        assert cells is None or cells["valid"].all()  # finished cells kept and readable
    servebook("sweep", study, "--journal", journal, timeout=400)
    done = [r for r in Journal(journal).runs() if r.status == "completed"]
    assert sorted(r.manifest.study_entry for r in done).count("baseline") >= 2
    assert sorted(r.manifest.study_entry for r in done).count("two-slots") >= 2
    assert {k: v for k, v in _sealed(journal).items() if k in before} == before
