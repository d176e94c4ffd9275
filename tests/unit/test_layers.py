"""The package's layers: each imports only the layers below it, and no module imports itself back.

Every import statement counts, at module level or inside a function, under `TYPE_CHECKING` or
not: a cycle hidden in a function or a type-only import is still a circle for the reader.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import kubesched

PACKAGE = Path(kubesched.__file__).parent
ROOT = "kubesched"
# Bottom to top. telemetry sits below kube and everything above it, but the pure layers (model,
# plugins, algorithm) do not import it; it imports nothing of ours but the root package.
LAYERS = ("model", "plugins", "algorithm", "kube", "runtime", "policy", "tools", "app", "cli")
TELEMETRY = "telemetry"
PURE = ("model", "plugins", "algorithm")
BASE = "base"  # the root package (its version string): importable from anywhere, imports nothing
MAIN = "main"  # `python -m kubesched`: above everything


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: Mapping[str, Path]) -> Iterator[str]:
    """The package's modules that `name` (at `path`) imports, wherever the import statement is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in known:
                    yield submodule
                elif source in known:
                    yield source


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: set(imported(name, path, known)) - {name} for name, path in known.items()}


def layer(module: str) -> str:
    if module == ROOT:
        return BASE
    parts = module.split(".")
    if parts[1] == "__main__":
        return MAIN
    if parts[1] in (*LAYERS, TELEMETRY):
        return parts[1]
    # Other modules beside cli.py (the version line, the kubectl plugin): the command-line layer.
    return "cli"


def allowed(source: str) -> set[str]:
    """The layers a module of layer `source` may import."""
    if source == BASE:
        return {BASE}
    if source == MAIN:
        return {BASE, TELEMETRY, *LAYERS, MAIN}
    if source == TELEMETRY:
        return {BASE, TELEMETRY}
    below = set(LAYERS[: LAYERS.index(source) + 1])
    return {BASE, *below} if source in PURE else {BASE, TELEMETRY, *below}


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One import cycle as a path that ends where it starts, or None."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = [start]
        on_path = {start}
        stack = [iter(sorted(graph[start]))]
        while stack:
            target = next(stack[-1], None)
            if target is None:
                stack.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
            elif target in on_path:
                return [*path[path.index(target) :], target]
            elif target not in done:
                path.append(target)
                on_path.add(target)
                stack.append(iter(sorted(graph.get(target, ()))))
    return None


def test_the_graph_sees_every_kind_of_import() -> None:
    graph = import_graph()
    assert "kubesched.kube.listing" in graph["kubesched.kube.informer"]  # module level
    assert "kubesched.app.run" in graph["kubesched.cli"]  # inside the `run` command
    assert not graph[ROOT]


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_each_layer_imports_only_the_layers_below_it() -> None:
    wrong = sorted(
        f"{source} ({layer(source)}) imports {target} ({layer(target)})"
        for source, targets in import_graph().items()
        for target in targets
        if layer(target) not in allowed(layer(source))
    )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("graph", "cycle"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
    ],
)
def test_find_cycle(graph: dict[str, set[str]], cycle: list[str] | None) -> None:
    assert find_cycle(graph) == cycle
