"""`servebook init`: a shipped study template with the user's model filled in, written next to them, that loads as
`servebook sweep` loads it and dry-runs to the engine's command lines (issue 53, item 2); and the shipped example
candidates for attaching to a running server (item 1)."""

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from servebook.cli import app
from servebook.config import InputError, load_candidate, load_study
from servebook.config.templates import TEMPLATES, model_ref, render, template_text, write_study
from servebook.engines import get_engine
from servebook.util.resources import shipped

REPO = Path(__file__).resolve().parents[3]
runner = CliRunner()

#: engine, --model, what the dry run must print for the baseline and for the variant
DRY_RUNS = [
    ("vllm", "Qwen/Qwen3-0.6B", "vllm serve Qwen/Qwen3-0.6B", "--max-num-batched-tokens 8192",
     "--max-num-batched-tokens 2048"),
    ("sglang", "Qwen/Qwen3-0.6B", "sglang serve --model-path Qwen/Qwen3-0.6B", "--chunked-prefill-size 8192",
     "--chunked-prefill-size 2048"),
    ("llamacpp", None, "llama-server -m ", "-b 512 -ub 512", "-b 2048 -ub 2048"),
]


@pytest.mark.parametrize("engine, model, program, base_flags, variant_flags", DRY_RUNS)
def test_init_writes_a_study_that_loads_and_dry_runs_to_the_engine_command_lines(
        tmp_path, engine, model, program, base_flags, variant_flags):
    args = ["init", engine, "--out", str(tmp_path / "studies")] + (["--model", model] if model else [])
    written = runner.invoke(app, args)
    assert written.exit_code == 0, written.output
    [path] = (tmp_path / "studies").glob("*.yaml")
    for command in (f"servebook sweep {path} --dry-run", f"servebook sweep {path}", f"servebook report {path}"):
        assert command in written.output, written.output
        assert command in path.read_text(), "the header gives the same commands"

    study = load_study(path)
    assert [entry.name for entry in study.expand()] == ["baseline", "chunk-2048"]
    assert study.base.engine == engine and study.verdict.rules, "a base, one variant and rules"
    assert {rule.metric for rule in study.verdict.rules} == {"aggregate_tok_s", "ttft_p90_s"}

    journal = tmp_path / "journal"
    dry = runner.invoke(app, ["sweep", str(path), "--dry-run", "--journal", str(journal)])
    assert dry.exit_code == 0, dry.output
    lines = [line for line in dry.output.splitlines() if line.strip().startswith("$ ")]
    assert len(lines) == 2 and all(program in line for line in lines), dry.output
    assert base_flags in lines[0] and variant_flags in lines[1]
    assert "nothing was started" in dry.output and not journal.exists()


def test_the_model_is_filled_in_as_a_hub_id_or_a_path(tmp_path):
    folder = tmp_path / "my model"
    folder.mkdir()
    vllm, llamacpp = TEMPLATES["vllm"], TEMPLATES["llamacpp"]
    assert model_ref("Qwen/Qwen3-0.6B", vllm) == {"id": "Qwen/Qwen3-0.6B"}
    assert model_ref("gpt2", vllm) == {"id": "gpt2"}
    assert model_ref(str(folder), vllm) == {"path": str(folder)}
    assert model_ref("/models/not-here-yet", vllm) == {"path": "/models/not-here-yet"}, "a path for another machine"
    assert model_ref("random:1b", vllm) == {"path": "random:1b"}
    assert model_ref("org/model.gguf", llamacpp) == {"path": "org/model.gguf"}, "llama.cpp serves local files only"

    text = render("sglang", str(folder), name="mine")
    assert yaml.safe_load(text)["base"]["model"] == {"path": str(folder)}, "a path with a space survives as YAML"


def test_a_relative_local_model_is_written_absolute_so_the_study_runs_from_anywhere(tmp_path, monkeypatch):
    (tmp_path / "models" / "m").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    written = write_study("vllm", "models/m", out=tmp_path / "out")
    assert load_study(written.path).base.model.path == str(tmp_path / "models" / "m")
    assert written.name == "vllm-m-chunk" and written.path == tmp_path / "out" / "vllm-m-chunk.yaml"


def test_gpus_become_the_engine_s_gpus_and_its_tensor_parallel_size(tmp_path):
    base = load_study(write_study("vllm", "Qwen/Qwen3-0.6B", out=tmp_path, gpus=[2, 3]).path).base
    assert base.launch.gpus == [2, 3] and base.knobs.tensor_parallel_size == 2
    one = load_study(write_study("sglang", "Qwen/Qwen3-0.6B", out=tmp_path, gpus=[1]).path).base
    assert one.launch.gpus == [1] and one.knobs.tensor_parallel_size == 1
    plain = load_study(write_study("sglang", "Qwen/Qwen3-0.6B", out=tmp_path, name="plain").path).base
    assert plain.launch.gpus is None and plain.knobs.tensor_parallel_size == 1


def test_init_never_overwrites_a_file_and_says_which(tmp_path):
    args = ["init", "vllm", "--model", "Qwen/Qwen3-0.6B", "--out", str(tmp_path), "--name", "mine"]
    assert runner.invoke(app, args).exit_code == 0
    path = tmp_path / "mine.yaml"
    path.write_text("# the user's edits\n")
    again = runner.invoke(app, args)
    assert again.exit_code == 2
    assert f"{path}: already exists" in again.output and len(again.output.strip().splitlines()) == 1, again.output
    assert path.read_text() == "# the user's edits\n"


def test_an_out_that_is_a_file_is_named_as_such(tmp_path):
    (tmp_path / "file").write_text("")
    result = runner.invoke(app, ["init", "llamacpp", "--out", str(tmp_path / "file")])
    assert result.exit_code == 2 and f"--out {tmp_path / 'file'}: is a file, not a folder" in result.output
    result = runner.invoke(app, ["init", "llamacpp", "--out", str(tmp_path / "file" / "below")])
    assert result.exit_code == 2 and "cannot make the folder" in result.output, result.output


@pytest.mark.parametrize("args, said", [
    (["init", "vllm"], "--model: give the model vLLM serves"),
    (["init", "vlm", "--model", "x/y"], "engine 'vlm': not known"),
    (["init", "llamacpp", "--gpus", "0"], "--gpus: the llama.cpp template is the CPU path"),
    (["init", "vllm", "--model", "x/y", "--gpus", "0,0"], "--gpus 0,0: distinct GPU indices"),
    (["init", "vllm", "--model", "x/y", "--gpus", "zero"], "--gpus 'zero'"),
    (["init", "vllm", "--model", "x/y", "--name", "../up"], "--name '../up'"),
])
def test_bad_arguments_are_one_message_and_exit_2_writing_nothing(tmp_path, args, said):
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and said in result.output, result.output
    assert not (tmp_path / "out").exists()


def test_every_shipped_template_is_an_engine_s_and_knows_its_model_format():
    files = {p.name for p in shipped("templates").iterdir() if p.name.endswith(".yaml")}
    assert files == {f"{engine}.yaml" for engine in TEMPLATES}
    for engine, template in TEMPLATES.items():
        adapter = get_engine(engine)
        assert template.model_format == adapter.model_format, engine
        assert f"engine: {engine}\n" in template_text(engine)


def test_the_written_study_points_an_editor_at_the_shipped_schema(tmp_path):
    text = write_study("llamacpp", out=tmp_path).path.read_text()
    first = text.splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=") and first.endswith("study.schema.json")
    assert Path(first.split("=", 1)[1]).is_file()


@pytest.mark.parametrize("engine, port", [("vllm", 8000), ("sglang", 30000), ("llamacpp", 8080)])
def test_the_example_attach_candidates_load(engine, port):
    path = REPO / "data" / "candidates" / f"attach-{engine}.yaml"
    candidate = load_candidate(path)
    assert candidate.engine == engine and candidate.launch.mode == "attach"
    assert candidate.launch.url == f"http://127.0.0.1:{port}" and candidate.model.served_name
    text = path.read_text()
    assert text.startswith("# ") and f"servebook run data/candidates/attach-{engine}.yaml" in text


def test_an_attach_candidate_without_its_url_is_refused(tmp_path):
    data = yaml.safe_load((REPO / "data" / "candidates" / "attach-vllm.yaml").read_text())
    del data["launch"]["url"]
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="attach mode needs the URL"):
        load_candidate(broken)
