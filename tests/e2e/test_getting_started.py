"""Getting started, walked as written (issue 53, item 6): every command of docs/getting-started.md's code blocks
runs here, against servebook's vLLM simulator where a page says a server at 127.0.0.1:8000 and the tiny model where
it says a model path; the commands that need a GPU or a person are named with where they are tested instead. A
command added to the page that this walk does not know fails it, so the page cannot outgrow its tests."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from servebook.launch.process import free_port
from tests.e2e.test_run_url import started
from tests.helpers.cli import servebook

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "getting-started.md"
#: commands of the page not run by this walk, and where they are run or why they cannot be
ELSEWHERE = {
    ". .venv/bin/activate": "the shell's own",
    "make demo": "its recipe's commands are walked by test_the_demos_commands_are_valid below; CI runs make test",
    "make lab": "tests/e2e/test_jupyterlab.py starts JupyterLab on the notebooks",
    "make test": "this suite",
    "servebook sweep STUDY": "launches vLLM on a GPU: the GPU studies of data/studies, recorded in docs/findings",
}
SIMULATOR = ["vllm", "serve", "Qwen/Qwen3-0.6B", "--max-num-seqs", "16"]


def page_commands() -> list[str]:
    """Each command line of the page's bash blocks, its comment cut off."""
    blocks = re.findall(r"```bash\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    lines = [line.split("  #")[0].split(" # ")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_every_command_of_getting_started_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # the page's paths are the checkout's
    journal = tmp_path / "journal"
    port = free_port()
    simulator = [sys.executable, "-m", "servebook.simulator", "--flavor", "vllm", "--", *SIMULATOR,
                 "--port", str(port)]
    candidate = yaml.safe_load((REPO / "data" / "candidates" / "attach-vllm.yaml").read_text())
    candidate["launch"]["url"] = f"http://127.0.0.1:{port}"  # the page's 8000, wherever a free port is
    attach = tmp_path / "attach-vllm.yaml"
    attach.write_text(yaml.safe_dump(candidate))
    study: Path | None = None
    ran: list[str] = []
    # the demo's section reads the journal `make demo` wrote: here it is read after the page's runs wrote one
    commands = [c for c in page_commands() if c not in ELSEWHERE]
    first_run = next(i for i, c in enumerate(commands) if c.startswith("servebook run"))
    reads = [c for c in commands[:first_run] if c.split()[1] in ("report", "journal")]
    with started(simulator, port, 30):
        for command in [c for c in commands if c not in reads] + reads:
            argv = shlex.split(command)
            assert argv[0] == "servebook", f"getting started names {command!r}, which this walk does not know"
            args = [a.replace("http://127.0.0.1:8000", f"http://127.0.0.1:{port}") for a in argv[1:]]
            args = [str(attach) if a == "data/candidates/attach-vllm.yaml" else a for a in args]
            if "STUDY" in args:
                assert study is not None, f"{command!r} comes before `servebook init` wrote the study"
                args = [str(study) if a == "STUDY" else a for a in args]
            if "RUN_ID" in args:
                listed = servebook("journal", "ls", "--journal", str(journal), "--format", "json")
                args = [re.search(r'"run_id": "([^"]+)"', listed.stdout).group(1) if a == "RUN_ID" else a
                        for a in args]
            if args[0] == "init":
                args = [a if a != "/path/to/model" else str(tmp_path / "model.gguf") for a in args]
                args += ["--out", str(tmp_path / "studies")]
            if args[0] in ("run", "report", "journal", "site", "sweep"):
                args += ["--journal", str(journal)]
            if args[0] == "site":
                args += ["--out", str(tmp_path / "site")]
            result = servebook(*args, check=False)
            assert result.returncode == 0, f"{command}: {result.stdout[-2000:]}{result.stderr[-2000:]}"
            if args[0] == "init":
                study = Path(re.search(r"wrote (\S+)", result.stdout).group(1))
                assert study.is_file(), result.stdout
            ran.append(command)
    assert (tmp_path / "site" / "index.html").is_file()
    assert {"servebook run --url http://127.0.0.1:8000", "servebook sweep STUDY --dry-run"} <= set(ran), ran


def test_the_demos_commands_are_valid(tmp_path):
    """`make demo`'s recipe, each sweep dry-run (its study loaded, its engine command lines built, its preflight
    checked; nothing started), and its site built: the full demo takes minutes and is run from a fresh clone before
    a stop (the session notes say when)."""
    recipe = subprocess.run(["make", "-n", "demo", "JOURNAL=" + str(tmp_path / "journal")], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    sweeps = [line for line in recipe.splitlines() if " sweep " in line]
    assert len(sweeps) == 3, recipe
    for line in sweeps:
        argv = shlex.split(line)
        result = servebook(*argv[argv.index("sweep"):], "--dry-run", check=False)
        assert result.returncode == 0, f"{line}: {result.stdout[-2000:]}{result.stderr[-2000:]}"
