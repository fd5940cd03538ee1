"""The shape the code keeps: small modules, short functions, no import cycles between modules."""

import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "lib" / "servebook"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def modules():
    return sorted(p for p in LIB.rglob("*.py") if "__pycache__" not in p.parts)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(LIB.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_is_over_the_limit():
    long = {str(p.relative_to(LIB)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_function_is_over_the_limit():
    long = {}
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(LIB)}:{node.name}"] = length
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def _imports(path: Path) -> set[str]:
    """servebook modules `path` imports, at module level or inside functions alike."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(c for c in candidates if c.startswith("servebook"))
    return found


def test_no_import_cycle_between_modules():
    """A cycle among modules (packages' __init__ re-exports aside) means two concepts that cannot be read apart."""
    paths = {module_name(p): p for p in modules() if p.name != "__init__.py"}
    graph = {name: {t for t in _imports(path) if t in paths and t != name} for name, path in paths.items()}
    cycles = []
    state: dict[str, int] = {}

    def visit(node, trail):
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append(trail[trail.index(target):] + [target])
            elif target not in state:
                visit(target, trail + [target])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize("forbidden", ["sweeps._", "distributed._"])
def test_tests_use_seams_not_privates(forbidden):
    tests = Path(__file__).resolve().parents[1]
    offenders = [str(p) for p in tests.rglob("*.py") if f"servebook.{forbidden}" in p.read_text()
                 and p.name != Path(__file__).name]
    assert not offenders


def test_no_test_imports_from_a_conftest():
    """Fixtures live in conftest.py and pytest hands them over; plain helpers live in tests/helpers and are imported
    from there (a conftest imported as a module is loaded twice, and its helpers drift into copies)."""
    tests = Path(__file__).resolve().parents[1]
    offenders = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if any(name.split(".")[-1] == "conftest" for name in names):
                offenders.append(f"{path.relative_to(tests)}:{node.lineno}")
    assert not offenders, offenders
