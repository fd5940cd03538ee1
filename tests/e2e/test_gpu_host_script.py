"""scripts/gpu-host.sh start/wait: a sweep detached from the call that started it, followed by later calls (a lent
machine's command limit is 10 minutes; the 8B study's two resident rounds took 12)."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def gpu_host(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO / "scripts/gpu-host.sh"), *args], env=env, capture_output=True, text=True,
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
