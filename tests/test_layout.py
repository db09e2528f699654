"""The package layout: no import circles between the modules of ``pydna`` (imports inside functions
count; ``if TYPE_CHECKING:`` blocks do not), and the command line split along its commands."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pydna"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """The pydna modules ``path`` imports at run time (anywhere in the file, TYPE_CHECKING excluded)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for child in node.body for n in ast.walk(child))
    found: set[str] = set()
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("pydna"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base.startswith("pydna"):
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)   # `from pydna import cli`
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in _imports(path) if m in files and m != name} for name, path in files.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]


def test_no_import_circles_in_pydna():
    graph = _graph()
    assert "pydna.cli_common" in graph["pydna.cli_memory"]
    assert _cycles(graph) == []


def test_cli_is_split_along_its_commands():
    graph = _graph()
    for module in ("pydna.cli_db", "pydna.cli_index", "pydna.cli_search", "pydna.cli_memory"):
        assert "pydna.cli" not in graph[module], module           # the commands never import the top level
    for path in PACKAGE.glob("cli*.py"):
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 600, path.name
