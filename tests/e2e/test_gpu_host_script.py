"""tools/gpu-host/gpu-host.sh start/wait: a sweep detached from the call that started it, followed by later calls (a lent
machine's command limit is 10 minutes; the 8B study's two resident rounds took 12)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def gpu_host(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO / "tools/gpu-host/gpu-host.sh"), *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_a_detached_sweep_outlives_its_call_and_wait_reports_it_running_then_its_status(tmp_path):
    # a stand-in for the sweep: what `study` runs is "$PYTHON -m servebook.cli sweep ..."; this one takes 4 s
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho \"candidate baseline (abc) -> run R1\"\necho \"from $PWD\"\nsleep 4\n"
                    "echo \"  seqs-8: rejected (1 run): decode\"\necho \"1 runs made\"\nexit 7\n")
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake), "STUDY_LOG": str(tmp_path / "study.log"), "TMPDIR": str(tmp_path),
           "JOURNAL": str(tmp_path / "journal")}
    started = gpu_host("start", "--resident", env=env)
    assert started.returncode == 0 and "started" in started.stdout
    running = gpu_host("wait", "1", env=env)
    assert running.returncode == 3 and "still running" in running.stdout
    assert "candidate baseline" in running.stdout
    ended = gpu_host("wait", "30", env=env)
    assert ended.returncode == 7, ended.stdout + ended.stderr
    assert "seqs-8: rejected" in ended.stdout and "ended with status 7" in ended.stdout
    # it ran from a copy of the code: a lent machine rewrites the checkout at every call, under a running sweep
    ran_in = Path(next(line for line in (tmp_path / "study.log").read_text().splitlines()
                       if line.startswith("from "))[5:])
    assert ran_in != REPO and (ran_in / "lib/servebook/__init__.py").is_file()
    assert (ran_in / "data/studies").is_dir() and not list(ran_in.glob("data/sample-journal*"))
    assert (ran_in / "tools/gpu-host/gpu-host.sh").is_file()


def test_a_real_dry_run_sweep_through_start_and_wait(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "STUDY": "data/studies/tiny-demo.yaml",
           "STUDY_LOG": str(tmp_path / "study.log"), "JOURNAL": str(tmp_path / "journal"), "TMPDIR": str(tmp_path)}
    assert gpu_host("start", "--dry-run", env=env).returncode == 0
    ended = gpu_host("wait", "60", env=env)
    assert ended.returncode == 0, ended.stdout + ended.stderr
    assert "nothing was started (--dry-run)" in (tmp_path / "study.log").read_text()


def test_wait_without_a_started_sweep_says_so(tmp_path):
    env = {**os.environ, "STUDY_LOG": str(tmp_path / "study.log")}
    missing = gpu_host("wait", "1", env=env)
    assert missing.returncode == 2 and "gpu-host.sh start" in missing.stderr


def test_setup_prepares_only_the_engines_that_the_studies_launch():
    # a bundle of vLLM and llama.cpp: a vLLM study alone must not spend a lent machine's minutes on llama.cpp's build
    env = {**os.environ, "PYTHON": sys.executable, "STUDY": "data/studies/h200-vllm-8b-sliced.yaml"}
    assert gpu_host("engines", env=env).stdout.split() == ["vllm"]
    both = {**env, "STUDY": "data/studies/h200-vllm-1b-noise-sliced.yaml data/studies/h200-llamacpp-1b-noise-sliced.yaml"}
    assert gpu_host("engines", env=both).stdout.split() == ["llamacpp", "vllm"]


def test_a_detached_sweep_of_two_studies_sweeps_each_in_turn(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho \"sweep $4\"\n[ \"${4##*/}\" = tiny-demo.yaml ] && exit 10\nexit 0\n")
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake), "STUDY_LOG": str(tmp_path / "study.log"), "TMPDIR": str(tmp_path),
           "JOURNAL": str(tmp_path / "journal"), "STUDY": "data/studies/tiny-demo.yaml data/studies/quick-compare.yaml"}
    assert gpu_host("start", env=env).returncode == 0
    ended = gpu_host("wait", "30", env=env)
    swept = [line.split("/")[-1] for line in (tmp_path / "study.log").read_text().splitlines() if line.startswith("sweep")]
    assert swept == ["tiny-demo.yaml", "quick-compare.yaml"]
    assert ended.returncode == 10  # the worse of the two statuses


def carried_parts(tmp_path: Path, count: int = 3) -> list[Path]:
    """A bundle's parts as calls carry them: each call's folder holds parts.json and one part."""
    import hashlib

    blob = os.urandom(count * 1000)
    whole = tmp_path / "bundle.tar"
    whole.write_bytes(blob)
    spec = importlib.util.spec_from_file_location("gpu_bundle_e2e", REPO / "tools/gpu-host/gpu_bundle.py")
    gb = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gb
    spec.loader.exec_module(gb)
    parts = gb.split_file(whole, tmp_path / "parts", 1000)
    manifest = {"archive": {"name": "bundle.tar", "size": len(blob), "sha256": hashlib.sha256(blob).hexdigest(),
                            "compression": "none"}, "parts": parts, "engines": [], "created": "now"}
    calls = []
    for part in parts:
        call = tmp_path / f"call-{part['name']}"
        call.mkdir()
        (call / "parts.json").write_text(json.dumps(manifest))
        (call / part["name"]).write_bytes((tmp_path / "parts" / part["name"]).read_bytes())
        calls.append(call)
    return calls


def test_receive_says_waiting_apart_from_failure_so_receive_and_setup_runs_setup_after_the_last_part(tmp_path):
    calls = carried_parts(tmp_path)
    env = {**os.environ, "PYTHON": sys.executable, "PARTS": str(tmp_path / "received")}
    script = str(REPO / "tools/gpu-host/gpu-host.sh")
    # the pattern the README gives: `receive DIR && setup` in every call (here `echo SETUP` stands in for setup)
    chain = ["bash", "-c", f'bash {script} receive "$1" && echo SETUP', "chain"]
    damaged = bytearray((calls[1] / "part-001").read_bytes())
    damaged[0] ^= 1
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "parts.json").write_bytes((calls[1] / "parts.json").read_bytes())
    (tmp_path / "bad" / "part-001").write_bytes(bytes(damaged))
    results = [subprocess.run([*chain, str(call)], env=env, capture_output=True, text=True, timeout=60)
               for call in (calls[0], tmp_path / "bad", calls[1], calls[2])]
    assert [r.returncode for r in results] == [3, 2, 3, 0], [r.stdout + r.stderr for r in results]
    assert ["SETUP" in r.stdout for r in results] == [False, False, False, True]
    assert "waiting for 2 of 3 parts" in results[0].stdout and "carry it again" in results[1].stdout
    again = subprocess.run([*chain, str(tmp_path / "empty")], env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "SETUP" in again.stdout  # a call after the last finds every part still there
    fresh = {**env, "PARTS": str(tmp_path / "other")}
    nothing = subprocess.run([*chain, str(tmp_path / "empty")], env=fresh, capture_output=True, text=True, timeout=60)
    assert nothing.returncode == 2 and "no parts.json" in nothing.stderr


def test_help_gives_the_steps_and_what_receives_exit_statuses_mean():
    shown = gpu_host("help", env=dict(os.environ))
    assert shown.returncode == 0 and "receive DIR" in shown.stdout and "3: parts still to come" in shown.stdout
    assert not shown.stdout.startswith("#!") and "set -euo" not in shown.stdout


def test_a_budgeted_study_call_hands_its_budget_to_the_sweep(tmp_path):
    # BUDGET=540: a call's sweep starts no resident round the time left cannot hold, and the next call resumes
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho \"$@\"\n")
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake), "BUDGET": "540", "STUDY": "data/studies/h200-vllm-8b-sliced.yaml"}
    swept = gpu_host("study", "--resident", "--seats", "6", env=env)
    assert swept.returncode == 0
    assert swept.stdout.split() == ["-m", "servebook.cli", "sweep", "data/studies/h200-vllm-8b-sliced.yaml", "--journal",
                                    "/tmp/sb-journal", "--time-budget", "540", "--resident", "--seats", "6"]
