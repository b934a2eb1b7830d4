"""Import rules import-linter cannot express.

1. Nothing imports another module's ``_private`` names (``from x import _y``).
2. No import cycle between our modules, function-local imports included: a
   cycle hidden inside a function is still a cycle (grimp sees every import).

Tests and migrations are exempt. Exit status 1 names each violation.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "governance", "memory", "providers", "fedmem_site", "fedmem_mcp")


def _exempt(module: str) -> bool:
    parts = module.split(".")
    return "tests" in parts or "migrations" in parts


def private_imports() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            if _exempt(module):
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    for alias in node.names:
                        if alias.name.startswith("_") and not alias.name.startswith("__"):
                            found.append(f"{module}:{node.lineno} imports {node.module}.{alias.name}")
    return found


def cycles() -> list[list[str]]:
    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    modules = {m for m in graph.modules if not _exempt(m)}
    # Tarjan's strongly connected components, iteratively (no recursion limit).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & modules)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child) & modules)))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main() -> int:
    problems = [f"private name: {line}" for line in private_imports()]
    problems += ["import cycle: " + " <-> ".join(component) for component in cycles()]
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
