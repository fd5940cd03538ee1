"""The `servebook` command as a user types it."""

import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from servebook.journal import Journal, samples
from tests.helpers.cli import SERVEBOOK, cli_env, servebook
from tests.helpers.processes import servers_on_port

REPO = Path(__file__).resolve().parents[2]
ENV = cli_env()


@pytest.fixture
def plan_file(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("decode: {concurrency: [1, 2, 4], categories: [prose, code], output_tokens: 16, rounds: 1}\n"
                    "prefill: {prompt_tokens: [256, 1024], requests: 1}\nwarmup_requests: 1\n"
                    "max_foreign_cpu_cores: 4\n")  # about the tables, not about other load on the CI host
    return path


def test_run_prints_the_published_tables_and_records_the_run(llama_install, tmp_path, plan_file):
    journal = tmp_path / "journal"
    result = servebook("run", "data/candidates/tiny-llamacpp.yaml", "--plan", plan_file, "--journal", journal)
    out = result.stdout
    for header in ("Concurrency", "Aggregate tok/s", "Per request tok/s", "TTFT",
                   "Prompt tokens", "Prefill tok/s", "First token"):
        assert header in out
    assert "Decode, prose prompts" in out and "Decode, code prompts" in out
    assert "INVALID" not in out
    [record] = Journal(journal).runs()
    assert record.status == "completed"
    assert record.manifest.summary.valid_cells == 8

    listing = servebook("journal", "ls", "--journal", journal).stdout
    assert record.run_id[4:] in listing and "completed" in listing
    assert max(len(line) for line in listing.splitlines() if "│" in line) <= 80, "the run table fits 80 columns"
    wide = servebook("journal", "ls", "--wide", "--journal", journal).stdout
    assert "study" in wide and "engine" in wide
    shown = servebook("journal", "show", record.run_id[-10:], "--journal", journal).stdout
    assert "Cold prefill" in shown


def test_unknown_knob_is_one_message_and_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {path: tiny:target}\nknobs: {chunk_sise: 256}\n")
    result = servebook("run", bad, "--journal", tmp_path / "j", check=False)
    assert result.returncode == 2
    assert "knobs.chunk_sise: unknown field" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "j" / "runs").exists() or not any((tmp_path / "j" / "runs").iterdir())


def test_bad_set_override_names_the_field(tmp_path):
    result = servebook("run", "data/candidates/tiny-llamacpp.yaml", "--set", "knobs.max_running_requests=zero",
                       "--journal", tmp_path / "j", check=False)
    assert result.returncode == 2 and "knobs.max_running_requests" in result.stderr


def test_ctrl_c_stops_the_engine_and_seals_an_interrupted_run(llama_install, tmp_path):
    journal = tmp_path / "journal"
    plan = tmp_path / "long.yaml"
    plan.write_text("decode: {concurrency: [1], categories: [prose], output_tokens: 3000, rounds: 3}\n"
                    "prefill: null\nwarmup_requests: 0\n")
    proc = subprocess.Popen([*SERVEBOOK, "run", "data/candidates/tiny-llamacpp.yaml", "--plan", str(plan),
                             "--journal", str(journal)], cwd=REPO, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    launch = None
    while time.monotonic() < deadline and launch is None:
        found = list((journal / "runs").glob("*/launch.json")) if (journal / "runs").exists() else []
        launch = found[0] if found else None
        time.sleep(0.1)
    assert launch is not None
    engine_log = launch.parent / "engine.log"
    while time.monotonic() < deadline and "slot" not in (engine_log.read_text() if engine_log.exists() else ""):
        time.sleep(0.1)
    time.sleep(1.0)  # let the measurement start
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    port = int(__import__("json").loads(launch.read_text())["base_url"].rsplit(":", 1)[1])
    assert servers_on_port(port) == []
    [record] = Journal(journal).runs()
    assert record.status == "interrupted"
    assert "sealed as interrupted" in " ".join(stderr.split())
    listing = servebook("journal", "ls", "--journal", journal).stdout
    assert "interrupted" in listing


def test_mutated_studies_through_the_cli_give_messages_not_tracebacks(tmp_path):
    """A sample of the property test in tests/unit/config/test_fuzz_inputs.py, through the real command."""
    import random

    import yaml

    rng = random.Random(20261130)
    hostile = [None, -1, "a/b", "../..", [], {}, {"x": 1}, "1e309", True, "", ["a"], 3.5]
    seed = yaml.safe_load((REPO / "data/studies/tiny-demo.yaml").read_text())
    outcomes = []
    for i in range(10):
        study = yaml.safe_load(yaml.safe_dump(seed))
        node = study
        key = rng.choice(list(node))
        for _ in range(rng.randint(0, 2)):  # walk down to a random field
            child = node[key]
            if not isinstance(child, (dict, list)) or not child:
                break
            node, key = child, rng.choice(list(child) if isinstance(child, dict) else range(len(child)))
        node[key] = rng.choice(hostile)
        path = tmp_path / f"mutant-{i}.yaml"
        path.write_text(yaml.safe_dump(study))
        result = servebook("sweep", path, "--dry-run", check=False)
        assert "Traceback" not in result.stdout + result.stderr, (path.read_text(), result.stderr)
        assert result.returncode in (0, 2), result.stderr
        outcomes.append(result.returncode)
    assert 2 in outcomes  # the sample does reach the refusals


def test_journal_show_prints_the_peers_percentiles_of_an_old_journal(tmp_path):
    """`journal show` on the committed sample journal (recorded before the latency columns): the TTFT, TPOT, ITL and
    end-to-end percentiles and the throughputs, computed from its raw tables as numpy's percentile does, and the
    journal left byte for byte as it was."""
    import hashlib

    import numpy as np
    import pandas as pd

    shutil.copytree(samples.sample_journal("sample-journal"), tmp_path / "journal")
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (tmp_path / "journal").rglob("*") if p.is_file()}
    run = sorted((tmp_path / "journal" / "runs").iterdir())[0]
    shown = servebook("journal", "show", run.name[-12:], "--journal", tmp_path / "journal").stdout
    for words in ("Latency percentiles per cell", "TTFT", "TPOT", "ITL (chunk gaps)", "end to end",
                  "Throughput per cell", "Requests/s", "Total tok/s"):
        assert words in shown
    requests = pd.read_parquet(run / "requests.parquet")
    mine = requests[requests["cell_id"] == "decode-prose-c1"]
    ttft_p99 = np.percentile(mine["t_first"] - mine["t_send"], 99) * 1000
    tpot_p90 = np.percentile((mine["t_last"] - mine["t_first"]) / (mine["completion_tokens"] - 1), 90) * 1000
    row = next(line for line in shown.splitlines() if "decode-prose-c1" in line and "TTFT" in line)
    # a p99 of 14 requests and a p90 of as many are printed, and marked for the samples they lack (measure.figures.tails)
    assert row.split("│")[-2].strip() == f"{ttft_p99:.1f} insufficient (n={len(mine)})"
    tpot = shown.splitlines()[shown.splitlines().index(row) + 1]
    assert "TPOT" in tpot and tpot.split("│")[-3].strip() == f"{tpot_p90:.2f} insufficient (n={len(mine)})"
    after = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (tmp_path / "journal").rglob("*") if p.is_file()}
    assert after == before
