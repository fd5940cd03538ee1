"""`servebook init`: a shipped study template with the user's model filled in, written next to them.

Each engine's template (lib/servebook/data/templates/, one file per engine, package data) is a whole study (base, one
variant, a plan of a few minutes, verdict rules) whose header says what each part does and how to run it. A few
`{{key}}` placeholders are filled here as text, so the header's comments reach the user's file unchanged; a
placeholder alone on its line is replaced by zero or more lines. The filled study is loaded as `servebook sweep`
loads it before anything is written, so a file init writes always runs.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from ..util.resources import shipped
from .errors import InputError
from .loading import study_from_data
from .names import is_safe_name, safe_name_from


@dataclass(frozen=True)
class Template:
    """What a template needs to know of its engine's models (checked against the engines by the tests)."""

    engine: str
    title: str
    #: the model format the engine serves: "gguf" (a local file) or "hf" (a local folder or a hub id)
    model_format: str
    #: the model used when --model is not given (None: the model must be given)
    default_model: str | None = None
    #: whether --gpus applies: the template's engine places a model on the GPUs it is given
    gpus: bool = True


TEMPLATES: dict[str, Template] = {t.engine: t for t in (
    Template("vllm", "vLLM", "hf"),
    Template("sglang", "SGLang", "hf"),
    Template("llamacpp", "llama.cpp", "gguf", default_model="tiny:target", gpus=False),
)}

#: model references servebook resolves itself (built-in tiny, random-weight and real models): paths, never hub ids
_GENERATED = ("tiny:", "random:", "real:")
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@dataclass(frozen=True)
class Written:
    """What init wrote, and the commands that come next (command, what it does)."""

    path: Path
    name: str
    commands: list[tuple[str, str]]


def template_text(engine: str) -> str:
    """The shipped template of `engine`, placeholders and all."""
    template = _template(engine)
    return shipped("templates", f"{template.engine}.yaml").read_text(encoding="utf-8")


def _template(engine: str) -> Template:
    if engine not in TEMPLATES:
        from ..util.suggest import unknown

        raise unknown("engine", engine, tuple(TEMPLATES))
    return TEMPLATES[engine]


def model_ref(value: str, template: Template) -> dict[str, str]:
    """`--model` as the candidate's model: a path (a local file or folder, made absolute where it exists, so the
    study runs from any folder; tiny:/random:/real:; or a path for the machine that will run the study) or, for
    engines that download models, a hub id (anything else: `Qwen/Qwen3-0.6B`, `gpt2`)."""
    value = value.strip()
    if not value:
        raise InputError("--model: give a model path or hub id")
    local = Path(value).expanduser()
    if not value.startswith(_GENERATED) and local.exists():
        return {"path": str(local.resolve())}
    if template.model_format == "hf" and not value.startswith((*_GENERATED, "/", "./", "../", "~")):
        return {"id": value}
    return {"path": value}  # llama.cpp serves a local file only


def default_name(engine: str, model: str) -> str:
    """`vllm-Qwen3-0.6B-chunk`: the engine, the model's last path part (without a GGUF suffix), the question."""
    stem = re.sub(r"\.gguf$", "", model.rstrip("/").rsplit("/", 1)[-1].replace(":", "-"), flags=re.I)
    return safe_name_from(f"{engine}-{stem}-chunk")


def study_name(engine: str, model: str | None = None, name: str | None = None) -> tuple[str, str]:
    """(model, study name): `model` or the template's default, and `name` or one made from the engine and model."""
    template = _template(engine)
    model = model if model is not None else template.default_model
    if model is None:
        raise InputError(f"--model: give the model {template.title} serves (a local folder or a hub id such as "
                         "Qwen/Qwen3-0.6B)")
    name = name or default_name(engine, model)
    if not is_safe_name(name):
        raise InputError(f"--name {name!r}: a study name becomes a file name: letters, digits and _ . , = + @ : - "
                         "(starting with a letter or digit)")
    return model, name


def render(engine: str, model: str | None = None, *, name: str | None = None, gpus: list[int] | None = None,
           file: str = "STUDY.yaml") -> str:
    """The template of `engine` filled in for `model`; `file` is how its header names the file it is written to."""
    template = _template(engine)
    model, name = study_name(engine, model, name)
    if gpus is not None and not template.gpus:
        raise InputError(f"--gpus: the {template.title} template is the CPU path; for GPUs use vllm or sglang "
                         "(or set launch.gpus in the written file)")
    if gpus is not None and (not gpus or len(set(gpus)) != len(gpus) or min(gpus) < 0):
        raise InputError(f"--gpus {','.join(map(str, gpus))}: distinct GPU indices, e.g. 0,1")
    values = {
        "name": name, "file": shlex.quote(file), "model_label": model,
        # JSON is YAML's flow style: any path or id is quoted safely
        "model": "{" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in model_ref(model, template).items()) + "}",
        # one engine over every GPU given: tensor parallel across them
        "tensor_parallel": f"    tensor_parallel_size: {len(gpus)}" if gpus and len(gpus) > 1 else "",
        "gpus": f"    gpus: [{', '.join(map(str, gpus))}]" if gpus else "",
    }
    return fill(template_text(engine), values)


def fill(text: str, values: dict[str, str]) -> str:
    """`text` with each `{{key}}` replaced; a placeholder alone on its line that is filled with nothing drops the
    line. A key the template names and `values` lacks is a bug in servebook, not the user's: KeyError."""
    lines = []
    for line in text.splitlines(keepends=True):
        whole = _PLACEHOLDER.fullmatch(line.strip())
        if whole is not None and not values[whole.group(1)]:
            continue
        lines.append(_PLACEHOLDER.sub(lambda m: values[m.group(1)], line))
    return "".join(lines)


def write_study(engine: str, model: str | None = None, *, out: Path = Path("."), name: str | None = None,
                gpus: list[int] | None = None) -> Written:
    """The filled template of `engine` written to OUT/NAME.yaml, loaded first as `servebook sweep` loads it; an
    existing file is never overwritten."""
    import yaml

    model, name = study_name(engine, model, name)
    target = out / f"{name}.yaml"
    text = render(engine, model, name=name, gpus=gpus, file=str(target))
    study_from_data(yaml.safe_load(text), f"servebook init {engine}")  # a filled study that would not run: say so now
    text = _schema_modeline() + text
    if target.exists():
        raise InputError(f"{target}: already exists; init never overwrites a file (give --name or --out, or move "
                         "it away)")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: is a file, not a folder; name a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"--out {out}: cannot make the folder ({error.strerror or error})") from None
    try:
        with target.open("x", encoding="utf-8") as handle:  # "x": a file that appeared meanwhile is not replaced
            handle.write(text)
    except FileExistsError:
        raise InputError(f"{target}: already exists; init never overwrites a file") from None
    except OSError as error:
        raise InputError(f"--out {out}: cannot write {target.name} there ({error.strerror or error})") from None
    quoted = shlex.quote(str(target))
    return Written(target, name, [
        (f"servebook sweep {quoted} --dry-run", "the exact engine command lines; starts nothing"),
        (f"servebook sweep {quoted}", "measure both configurations, launches interleaved; verdicts at the end"),
        (f"servebook report {quoted}", "which configuration to run, and why"),
    ])


def _schema_modeline() -> str:
    """The line YAML language servers (VS Code's YAML extension, and others) read to complete and check the file
    against the study schema servebook ships; none where the package is not files on disk (a zipped install)."""
    resource = shipped("schemas", "study.schema.json")
    return f"# yaml-language-server: $schema={resource}\n" if isinstance(resource, Path) and resource.is_file() else ""
