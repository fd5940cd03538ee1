"""`import servebook as sb` is what a notebook needs, and stays light until a name is used."""

import subprocess
import sys

import servebook as sb


def test_public_names_resolve_and_are_listed():
    for name in ("load_candidate", "load_study", "Journal", "qualify", "compare", "judge", "sweep", "build_site",
                 "report", "RunRecord", "Manifest"):
        assert name in sb.__all__ and getattr(sb, name) is not None


def test_import_is_lazy():
    code = ("import sys, servebook; heavy = [m for m in ('pandas', 'plotly', 'papermill', 'openai', 'nbconvert') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_run_record_displays_as_a_short_summary(tmp_path):
    from servebook.journal import Journal, Manifest

    journal = Journal(tmp_path)
    writer = journal.start_run("abcdef123456")
    writer.seal(Manifest(status="failed", candidate_label="tiny", candidate_id="abcdef123456",
                         failure={"stage": "launch", "cause": "bad_flag", "message": "invalid argument: --x"}))
    record = journal.run(writer.run_id)
    plain = record._repr_mimebundle_()["text/plain"]
    assert len(plain.splitlines()) <= 4 and "bad_flag" in plain and writer.run_id in plain
    assert "RunRecord(" not in plain


def test_the_static_copy_names_every_lazy_name_from_the_same_module():
    """What editors and mypy see (the TYPE_CHECKING imports) is what `sb.NAME` gives: the same names, each from the
    module `__getattr__` imports it from, and the same object."""
    import ast
    import importlib
    from pathlib import Path

    tree = ast.parse(Path(sb.__file__).read_text())
    [block] = [node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"]
    static = {alias.asname or alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
              for alias in node.names}
    lazy = {name: module for name, module in sb._PUBLIC.items()}
    assert static == lazy
    assert sorted(sb.__all__) == sorted([*lazy, "__version__"])
    for name, module in lazy.items():
        assert getattr(sb, name) is getattr(importlib.import_module(f"servebook.{module}"), name), name
