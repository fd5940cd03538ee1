"""`servebook init ENGINE --model M`: a study of two configurations of the user's model, written next to them."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ._app import app, friendly, out


@app.command("init")
@friendly
def init_cmd(
    engine: str = typer.Argument(..., help="vllm, sglang, or llamacpp (the CPU path; the built-in tiny model unless "
                                           "--model names a GGUF file)"),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="the model to serve: a local path (a Hugging Face "
                                                                    "folder; a GGUF file for llamacpp) or a hub id "
                                                                    "such as Qwen/Qwen3-0.6B"),
    out_dir: Path = typer.Option(Path("."), "--out", "-o", help="folder to write the study in (made if missing)"),
    name: Optional[str] = typer.Option(None, "--name", help="the study's name and file name (default: "
                                                            "ENGINE-MODEL-chunk)"),
    gpus: Optional[str] = typer.Option(None, "--gpus", help="GPU indices for the engine, e.g. 0,1 (tensor parallel "
                                                            "across them; default: the first GPU)"),
):
    """Write a study comparing two configurations of your model (a base, one variant, a plan of a few minutes and
    verdict rules), commented, ready for `servebook sweep`; never overwrites a file."""
    from ..config.templates import write_study
    from ..sweeps.options import parse_gpus

    written = write_study(engine, model, out=out_dir, name=name, gpus=parse_gpus(gpus))
    width = max(len(command) for command, _ in written.commands)
    lines = [f"wrote {written.path} (study {written.name}; its header says what each part does)", "next:",
             *(f"  {command.ljust(width)}   # {what}" for command, what in written.commands)]
    out.print("\n".join(lines), soft_wrap=True, highlight=False)
