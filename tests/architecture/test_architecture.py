"""The shape of the package: no import cycles, no oversized module without a stated reason,
and a README layout that names exactly the modules there are."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"smug_opt": ROOT / "smug_opt", "smug_opt_backends": ROOT / "backends"}
MAX_LINES = 400
LONG_MODULE_REASON = "Kept as one module"


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project's two packages."""
    out = {}
    for package, directory in PACKAGES.items():
        for path in sorted(directory.rglob("*.py")):
            parts = [package, *path.relative_to(directory).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imported_names(name: str, path: Path) -> set[str]:
    """Every module ``name`` imports, at the top or inside functions (a lazy import is a
    dependency too); imports only for type checkers are left out. ``from pkg import x``
    depends on ``pkg.x`` when that is a module, else on ``pkg``."""
    modules = _modules()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking_block(child):
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = package[: len(package) - child.level + 1] if child.level else []
                source = ".".join([*base, *([child.module] if child.module else [])])
                for alias in child.names:
                    sub = f"{source}.{alias.name}"
                    found.add(sub if sub in modules else source)
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return found


def _project_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        edges = set()
        for target in _imported_names(name, path):
            while target and target not in modules:  # `import a.b.c` names module a.b.c or a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                edges.add(target)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_project_has_no_import_cycle():
    graph = _project_graph()
    assert len(graph) > 50 and graph["smug_opt.problem_file"] >= {"smug_opt.ir"}
    cycles = _cycles(graph)
    detail = "; ".join(
        " <-> ".join(c) + " (" + ", ".join(f"{v} imports {sorted(graph[v] & set(c))}" for v in c) + ")"
        for c in cycles)
    assert not cycles, f"import cycles: {detail}"


def test_the_cycle_finder_finds_a_cycle():
    """The check above can fail: a two-module loop and a longer one are both found."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c", "a"}, "f": set()}
    assert sorted(_cycles(graph)) == [["a", "b"], ["c", "d", "e"]]


def test_imports_inside_functions_and_relative_ones_count():
    names = _imported_names("smug_opt.bench.child", PACKAGES["smug_opt"] / "bench" / "child.py")
    assert "smug_opt.registry" in names  # imported inside main()
    assert "smug_opt.ir" not in names  # only for type checkers


@pytest.mark.parametrize("name", sorted(_modules()))
def test_a_module_over_400_lines_says_why_at_its_top(name):
    path = _modules()[name]
    lines = len(path.read_text().splitlines())
    if lines <= MAX_LINES:
        return
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert LONG_MODULE_REASON in docstring, (
        f"{path.relative_to(ROOT)} has {lines} lines (> {MAX_LINES}): split it along its "
        f"concepts, or say why not in its docstring ('{LONG_MODULE_REASON} ... because ...')")


def _readme_layout() -> set[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Layout\n", 1)[1]
    block = section.split("```", 2)[1]
    return {m.group(1) for m in re.finditer(r"^  (\w+/?) ", block, flags=re.MULTILINE)}


def test_the_readme_layout_names_every_module_and_nothing_else():
    package = PACKAGES["smug_opt"]
    actual = {p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")}
    actual |= {f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()}
    listed = _readme_layout()
    assert listed == actual, (f"README's layout lists {sorted(listed - actual)} that do not exist "
                              f"and misses {sorted(actual - listed)}")


def _literal_backend_defaults(tree: ast.AST, name: str) -> list[int]:
    """Lines where ``name`` is written as a default: a parameter's, or a flag's ``default=``."""
    lines = []
    for node in ast.walk(tree):
        defaults: list[ast.expr | None] = []
        if isinstance(node, ast.arguments):
            defaults = [*node.defaults, *node.kw_defaults]
        elif isinstance(node, ast.Call):
            defaults = [k.value for k in node.keywords if k.arg == "default"]
        elif isinstance(node, ast.AnnAssign):
            defaults = [node.value]
        for value in defaults:
            if value is not None and any(isinstance(c, ast.Constant) and c.value == name
                                         for c in ast.walk(value)):
                lines.append(value.lineno)
    return sorted(lines)


def test_the_default_backend_is_declared_once():
    """Every signature, settings field and flag defaults to DEFAULT_BACKEND, not its spelling."""
    from smug_opt.backend_choice import DEFAULT_BACKEND

    written = {f"{path.relative_to(ROOT)}:{line}"
               for name, path in _modules().items() if name.startswith("smug_opt.")
               for line in _literal_backend_defaults(ast.parse(path.read_text()), DEFAULT_BACKEND)}
    assert not written, f"write DEFAULT_BACKEND, not {DEFAULT_BACKEND!r}, at {sorted(written)}"
    planted = ast.parse(f'def f(backend="{DEFAULT_BACKEND}"): ...\nx: str = "{DEFAULT_BACKEND}"')
    assert _literal_backend_defaults(planted, DEFAULT_BACKEND) == [1, 2]
