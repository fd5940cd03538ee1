"""The shape the code keeps: small modules, short functions, no import cycles between modules."""

import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "lib" / "servebook"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_FOLDER_MODULES = 15


def modules():
    return sorted(p for p in LIB.rglob("*.py") if "__pycache__" not in p.parts)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(LIB.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_is_over_the_limit():
    long = {str(p.relative_to(LIB)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_folder_of_measure_holds_more_than_its_share_of_modules():
    """measure/ in rooms (transport, observers, figures, kinds), so a reader finds a module by what it does: no folder
    of it holds more than MAX_FOLDER_MODULES modules, its `__init__` counted."""
    folders = {p.parent for p in (LIB / "measure").rglob("*.py") if "__pycache__" not in p.parts}
    crowded = {str(f.relative_to(LIB)): n for f in folders if (n := len(list(f.glob("*.py")))) > MAX_FOLDER_MODULES}
    assert not crowded, f"folders of measure/ over {MAX_FOLDER_MODULES} modules: {crowded}"


def test_no_function_is_over_the_limit():
    long = {}
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(LIB)}:{node.name}"] = length
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def _is_package(name: str) -> bool:
    return (LIB.parent / name.replace(".", "/") / "__init__.py").exists()


def _module_path(name: str) -> Path | None:
    """The file of module `name` (a package's `__init__.py`), or None when `name` is no servebook module."""
    base = LIB.parent / name.replace(".", "/")
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.exists():
            return path
    return None


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    if not node.level:
        return node.module or ""
    base = package.split(".")[:len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _defining(module: str, name: str, seen: frozenset[str] = frozenset()) -> str:
    """The module that defines `name` as `from module import name` finds it: in a package, what its `__init__`
    binds last under that name (a re-export followed to the module it comes from), else a submodule of that name;
    else `module` itself."""
    path = _module_path(module)
    if path is not None and path.name == "__init__.py" and module not in seen:
        last: ast.stmt | None = None
        for node in ast.parse(path.read_text()).body:
            if _binds_in(node, name):
                last = node
        if isinstance(last, ast.ImportFrom) and (source := _absolute(path, last)).startswith("servebook"):
            original = next(a.name for a in last.names if (a.asname or a.name) == name)
            if source == module:  # `from . import sub`
                return f"{module}.{original}" if _module_path(f"{module}.{original}") else module
            return _defining(source, original, seen | {module})
        if last is not None:
            return module
    return f"{module}.{name}" if _module_path(f"{module}.{name}") else module


def _binds_in(node: ast.stmt, name: str) -> bool:
    """Whether the top-level statement `node` binds `name` (defines it, assigns it, or imports it)."""
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name == name
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Name) and t.id == name for t in targets)
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name) == name for a in node.names)
    return False


def _packages_entered(importer: str, target: str) -> set[str]:
    """Packages whose `__init__` importing `target` runs and `importer` is not already inside."""
    parts = target.split(".")
    prefixes = (".".join(parts[:i]) for i in range(2, len(parts) + 1))
    return {p for p in prefixes if _is_package(p) and not (importer + ".").startswith(p + ".") and p != importer}


def _walks_its_package(path: Path) -> bool:
    """A package `__init__` that imports its modules by walking the package (importlib, as measure/kinds does)."""
    return path.name == "__init__.py" and "importlib.import_module" in path.read_text()


def _imports(path: Path) -> set[str]:
    """The servebook modules that importing `path` (or calling its functions) runs.

    Every import counts as an edge: at module level, inside a function (deferred: it runs at the call, and a
    deferred import that closes a circle is the circle's way of hiding) and under TYPE_CHECKING (the type names
    a concept of the other module: two modules that name each other's types cannot be read apart). `from pkg
    import name` is an edge to the module that defines `name` (read through pkg's `__init__` re-exports), plus
    an edge to every package `__init__` the import runs (the importer's own packages aside, which Python has
    already begun); a package `__init__` that imports its modules by walking the package has an edge to each."""
    importer = module_name(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(path, node)
            targets = {_defining(source, alias.name) for alias in node.names}
        elif isinstance(node, ast.Import):
            targets = {alias.name for alias in node.names}
        else:
            continue
        for target in (t for t in targets if t.startswith("servebook.") and _module_path(t)):
            found |= {target} | _packages_entered(importer, target)
    if _walks_its_package(path):
        found |= {f"{importer}.{p.stem}" for p in path.parent.glob("*.py") if p.name != "__init__.py"}
        found |= {f"{importer}.{p.name}" for p in path.parent.iterdir() if (p / "__init__.py").exists()}
    return found - {importer}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted: every circle lies in one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            if component:
                circles.append(sorted(component + [node]))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return circles


def test_no_import_cycle_between_modules():
    """A circle among modules means concepts that cannot be read apart, packages' `__init__` files included."""
    paths = {module_name(p): p for p in modules()}
    graph = {name: {t for t in _imports(path) if t in paths} for name, path in paths.items()}
    circles = _circles(graph)
    assert not circles, "import circles:\n" + "\n".join(" ".join(c) for c in circles)


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


def test_the_cycle_test_reads_re_exports_to_the_module_that_binds_them():
    """`from servebook.measure.kinds import CellSpec` is an edge to the module that defines CellSpec, not to the
    package: every name a package `__init__` re-exports resolves to a submodule of that name or to a module (never
    a package `__init__`) that binds it."""
    unresolved = []
    for path in (p for p in modules() if p.name == "__init__.py"):
        package = module_name(path)
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ImportFrom) or not _absolute(path, node).startswith("servebook"):
                continue
            for alias in node.names:
                found = _defining(package, alias.asname or alias.name)
                where = _module_path(found)
                submodule = found == f"{_absolute(path, node)}.{alias.name}"
                if where is None or not (submodule or (where.name != "__init__.py"
                                         and any(_binds_in(n, alias.name) for n in ast.parse(where.read_text()).body))):
                    unresolved.append(f"{package}.{alias.asname or alias.name} -> {found}")
    assert not unresolved, unresolved


def test_a_circle_closed_through_a_package_init_is_seen():
    """The circle that once hid in measure/: a module importing a name from a package whose `__init__` imports
    every module of the package, one of which names the first module's type (TYPE_CHECKING)."""
    graph = {"workloads": {"kinds.base", "kinds"}, "kinds": {"kinds.base", "kinds.decode"},
             "kinds.decode": {"kinds.base", "workloads"}, "kinds.base": set()}
    assert _circles(graph) == [["kinds", "kinds.decode", "workloads"]]


def test_branches_are_capped_by_ruff_not_by_folding_lines():
    """ruff's mccabe check caps each function's branches (`make check` runs it over lib/ and tests/), so a module
    kept under its line cap by packing lines does not also hide a function nobody can follow."""
    import tomllib

    lint = tomllib.loads((LIB.parents[1] / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert "C90" in lint["select"] and lint["mccabe"]["max-complexity"] <= 13
