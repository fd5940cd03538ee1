"""The CI recipe end to end: examples/ci/gate.sh against the simulator and an S3 journal on loopback.

A qualification accepts a configuration on engine 1.0; a gate then measures the same configuration on engine
1.1 (unchanged) and on engine 1.2 (every step 30% longer, planted), each against the recorded accepted runs, not
against a baseline run again. The plant is large because the client's own per-token work is not slowed, so on a
busy 2-core CI machine a 10% plant measured only -5% and -6%, too near the 4% limit for 4 runs to decide. The unchanged release passes; the slower one fails the job with exit 10, its JUnit file
holds the failing cell and its Markdown summary names it with its interval.
"""

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = pytest.mark.simulator
REPO = Path(__file__).resolve().parents[2]

PLAN = """
plan:
  decode: {concurrency: [1, 4], categories: [prose], output_tokens: 32, rounds: 2}
  prefill: null
  warmup_requests: 1
  max_foreign_cpu_cores: 4
"""
RULES = "    - {metric: aggregate_tok_s, concurrency: [1, 4], max_regression_pct: 4}\n"


def base(version: str, slowdown: float) -> str:
    return f"""
base:
  engine: vllm
  model: {{id: org/model}}
  knobs: {{max_running_requests: 4}}
  extra_args: [--sim-version, "{version}", --sim-slowdown, "{slowdown}", --sim-run-noise, "0.01"]
  launch: {{simulator: true, ready_timeout_s: 20}}
"""


def qualify_study() -> str:
    return "name: qualify-sim\nrepeats: 3\n" + base("1.0", 1.0) + PLAN + "verdict:\n  rules:\n" + RULES


def gate_study(version: str, slowdown: float) -> str:
    return (f"name: gate-sim-{version}\nrepeats: 3\n" + base(version, slowdown) + PLAN
            + "verdict:\n  baseline_from: {candidate: baseline, study: qualify-sim, max_age_days: 7}\n  rules:\n"
            + RULES)


def test_the_example_gate_passes_an_unchanged_release_and_fails_a_slower_one(s3, tmp_path):
    env = {**os.environ, **s3, "SERVEBOOK_PLAIN_PROGRESS": "1", "COLUMNS": "160",
           "SERVEBOOK_MIRRORS": str(tmp_path / "mirrors"), "SERVEBOOK_JOURNAL": "s3://journals/ci",
           "SERVEBOOK": f"{sys.executable} -m servebook.cli", "FAIL_ON": "rejected", "MAX_REPEATS": "4"}
    for name, text in {"qualify.yaml": qualify_study(), "gate-1.1.yaml": gate_study("1.1", 1.0),
                       "gate-1.2.yaml": gate_study("1.2", 1.3)}.items():
        (tmp_path / name).write_text(text)
    qualified = subprocess.run([sys.executable, "-m", "servebook.cli", "sweep", tmp_path / "qualify.yaml"],
                               capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert qualified.returncode == 0, qualified.stdout + qualified.stderr

    def gate(version: str) -> tuple[subprocess.CompletedProcess, Path]:
        out = tmp_path / f"out-{version}"
        summary = tmp_path / f"step-summary-{version}.md"
        result = subprocess.run([str(REPO / "examples/ci/gate.sh")], capture_output=True, text=True, cwd=REPO,
                                timeout=900, env={**env, "STUDY": str(tmp_path / f"gate-{version}.yaml"),
                                                  "ENGINE_VERSION": version, "GATE_OUT": str(out),
                                                  "GITHUB_STEP_SUMMARY": str(summary)})
        assert summary.is_file() and "| baseline |" in summary.read_text(), result.stdout + result.stderr
        assert (out / "site" / "index.html").is_file() and (out / "verdicts.json").is_file(), result.stdout + result.stderr
        return result, out

    unchanged, out = gate("1.1")
    assert unchanged.returncode == 0, unchanged.stdout + unchanged.stderr
    suite = ET.parse(out / "verdicts.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    assert "baseline: 3 recorded run(s) of baseline (engine 1.0" in (out / "verdicts.json").read_text()

    slower, out = gate("1.2")
    assert slower.returncode == 10, slower.stdout + slower.stderr
    failing = [case for case in ET.parse(out / "verdicts.xml").getroot().iter("testcase")
               if case.find("failure") is not None]
    cells = {case.get("name") for case in failing}
    assert "verdict" in cells and cells & {"aggregate_tok_s prose at 1 request", "aggregate_tok_s prose at 4 requests"}
    summary = (out / "summary.md").read_text()
    # the limits said once for the study, the deciding cell's words beside its interval (issue 55, words once)
    assert "**rejected**" in summary and "aggregate decode, prose at" in summary and "limits: aggregate decode -4%" in summary
    assert "[-" in summary  # the deciding cell's interval

    history = subprocess.run([sys.executable, "-m", "servebook.cli", "history", "baseline", "--format", "json"],
                             capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert history.returncode == 0, history.stderr
    assert '"engine_version": "1.0"' in history.stdout and '"engine_version": "1.2"' in history.stdout


def test_a_papermill_run_of_qualify_fails_on_the_outcomes_it_is_asked_to(tmp_path):
    candidate = ("candidate: {engine: vllm, model: {id: org/model}, knobs: {max_running_requests: 2},\n"
                 "            launch: {simulator: true, sim_faults: [oom_warmup], ready_timeout_s: 10}}\n"
                 "candidate_path: null\n"
                 "plan: {decode: {concurrency: [1], categories: [prose], output_tokens: 8, rounds: 1}, prefill: null}\n"
                 "plan_path: null\n")
    env = {**os.environ, "SERVEBOOK_PLAIN_PROGRESS": "1"}

    def papermill(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(Path(sys.executable).parent / "papermill"), "qualify.ipynb",
                               str(tmp_path / "out.ipynb"), "--cwd", ".", "-k", "python3", "-p", "journal",
                               str(tmp_path / "journal"), "-y", candidate, *extra],
                              cwd=REPO / "notebooks", env=env, capture_output=True, text=True, timeout=600)

    assert papermill().returncode == 0  # a failed load is a record, and the notebook ran to its end
    gated = papermill("-p", "fail_on", "rejected,failed")
    assert gated.returncode != 0 and "GateFailed" in gated.stderr and "exit 11" in gated.stderr
