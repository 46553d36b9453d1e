"""No import cycle between modules of `bot/` and `policies/` at run time.

An import under `if TYPE_CHECKING:` is for the type checker only and does not count; every other
import does, a function's deferred import included, since it runs when the function does.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bot", "policies")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    module_name(path): path
    for package in PACKAGES
    for path in sorted((ROOT / package).rglob("*.py"))
}


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def imported(name: str) -> set[str]:
    """The modules of `bot/` and `policies/` that module `name` imports at run time."""
    targets: set[str] = set()
    for node in _imports(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif node.module is None or node.level:
            continue
        else:
            candidates = [f"{node.module}.{alias.name}" for alias in node.names]
            candidates = [c if c in MODULES else node.module for c in candidates]
        targets |= {c for c in candidates if c in MODULES and c != name}
    return targets


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
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
            component: list[str] = []
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


def test_cycles_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def import_cycles() -> list[list[str]]:
    return cycles({name: imported(name) for name in MODULES})


def test_no_import_cycle_at_run_time() -> None:
    # In a fresh interpreter: CPython 3.11's AST constructor keeps a recursion counter that a
    # failed or concurrent conversion elsewhere in the process can leave wrong (python/cpython
    # #106905), after which every `ast.parse` there raises SystemError.
    found = subprocess.run(
        [sys.executable, __file__], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(found.stdout) == []


if __name__ == "__main__":
    print(json.dumps(import_cycles()))
