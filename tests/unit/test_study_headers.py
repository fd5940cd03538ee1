"""The GPU studies' headers give commands that fit a call (issue 53: h200-vllm-8b-sliced.yaml's header swept two
resident rounds, 12 minutes, in one call of 10): every `gpu-host.sh study` or `start` a header gives is a sweep the
CLI parses, and a `study` of resident rounds carries BUDGET, so that one call ends between rounds."""

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from servebook.cli import app

ROOT = Path(__file__).resolve().parents[2]
# `[VAR=value ...] [bash] tools/gpu-host/gpu-host.sh study|start ARGS`, up to a closing backtick, a comment or the end
_COMMAND = re.compile(r"((?:[A-Z_]+=\S+\s+)*)(?:bash\s+)?tools/gpu-host/gpu-host\.sh (study|start)\b([^`#\n]*)")


def header_commands(path: Path) -> list[tuple[dict[str, str], str, list[str]]]:
    """(environment, step, sweep arguments) of each study or start command in a study file's header."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    text = re.sub(r"\\\s*\n\s*", " ", "\n".join(lines))  # a command continued on the next comment line
    found = []
    for env, step, args in _COMMAND.findall(text):
        variables = dict(pair.split("=", 1) for pair in env.split())
        found.append((variables, step, shlex.split(args.strip().rstrip(".:;,)"))))
    return found


def parse_error(study: str, args: list[str]) -> str | None:
    """What the CLI says of `servebook sweep STUDY ARGS`, parsed and not run (--help stops it once the options parse;
    an option it does not have fails first)."""
    result = CliRunner().invoke(app, ["sweep", study, "--journal", "j", *args, "--help"])
    return None if result.exit_code == 0 else result.output


def test_every_header_command_is_a_sweep_the_cli_parses_and_resident_studies_carry_a_budget():
    seen = 0
    for path in sorted((ROOT / "data" / "studies").glob("*.yaml")):
        for env, step, args in header_commands(path):
            seen += 1
            study = env.get("STUDY", str(path.relative_to(ROOT)))
            error = parse_error(study, args)
            assert error is None, f"{path.name}: `gpu-host.sh {step} {' '.join(args)}`: {error}"
            if step == "study" and "--resident" in args and path.name != "h200-vllm-replicas.yaml":  # a record of
                assert "BUDGET" in env, f"{path.name}: a resident study in one call needs BUDGET"  # a past session
    assert seen >= 6, "the GPU studies' headers name their commands"


def test_a_command_is_read_across_lines_and_an_unknown_option_is_found(tmp_path):
    study = tmp_path / "s.yaml"
    study.write_text("# run it:\n#   BUDGET=540 STUDY=s.yaml bash tools/gpu-host/gpu-host.sh study --resident \\\n"
                     "#     --seats 3   # one round a call\n# `tools/gpu-host/gpu-host.sh start --repeats 2`, then\n"
                     "name: s\n")
    assert header_commands(study) == [({"BUDGET": "540", "STUDY": "s.yaml"}, "study", ["--resident", "--seats", "3"]),
                                      ({}, "start", ["--repeats", "2"])]
    assert "No such option: --repeats" in parse_error("data/studies/tiny-demo.yaml", ["--repeats", "2"])
