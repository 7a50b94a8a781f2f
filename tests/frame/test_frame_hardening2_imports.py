"""dpkit.frame's modules import one another without a cycle.

Every import counts: at module level, under ``if TYPE_CHECKING:``, and inside functions (an import
moved into a function to dodge a cycle is still a cycle in the design).
"""

from __future__ import annotations

import ast
from pathlib import Path

import dpkit.frame

PACKAGE = "dpkit.frame"
ROOT = Path(dpkit.frame.__file__).parent


def _module_name(path: Path) -> str:
    return PACKAGE if path.name == "__init__.py" else f"{PACKAGE}.{path.stem}"


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports, anywhere in its syntax tree."""
    name = _module_name(path)
    base = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:  # relative: resolve against the package
                parts = base.split(".")[: len(base.split(".")) - node.level + 1]
                mod = ".".join([*parts, mod] if mod else parts)
            # ``from dpkit.frame import _x`` imports the submodule _x
            targets = [mod, *(f"{mod}.{a.name}" for a in node.names)]
        else:
            continue
        out |= {t for t in targets if t in modules and t != name}
    return out


def _graph() -> dict[str, set[str]]:
    files = sorted(ROOT.glob("*.py"))
    modules = {_module_name(p) for p in files}
    graph = {_module_name(p): _imports(p, modules) for p in files}
    # every submodule import runs the package's __init__ first, which is not a design edge
    return {m: deps - {PACKAGE} for m, deps in graph.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (a list of modules), or None: depth-first search with colours."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return [*stack[stack.index(d) :], d]
            if d not in state and (found := visit(d)) is not None:
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)) is not None:
            return found
    return None


def test_frame_import_graph_is_acyclic() -> None:
    graph = _graph()
    assert len(graph) > 10  # the parser found the package's modules
    assert f"{PACKAGE}._pipeline" in graph[f"{PACKAGE}._grouped"]  # and their imports
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
