"""The pure layers (model/, plugins/, algorithm/) import no network, file, process, thread or asyncio
module, directly or through another kubesched module: the algorithm runs off the event loop,
in microseconds under test, and its I/O (the extenders' HTTP) is injected by the runtime."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "operator" / "kubesched"
PURE_LAYERS = ("model", "plugins", "algorithm")

# A module is forbidden with everything under it ("http" forbids "http.client").
FORBIDDEN = frozenset(
    {
        # network
        "aiohttp",
        "asyncio",
        "ftplib",
        "http",
        "httpx",
        "imaplib",
        "kopf",
        "kubernetes_asyncio",
        "poplib",
        "requests",
        "select",
        "selectors",
        "smtplib",
        "socket",
        "socketserver",
        "ssl",
        "urllib.request",
        "urllib3",
        "xmlrpc",
        # files
        "dbm",
        "fcntl",
        "fileinput",
        "glob",
        "io",
        "mmap",
        "os",
        "pathlib",
        "shelve",
        "shutil",
        "sqlite3",
        "tarfile",
        "tempfile",
        "zipfile",
        # processes and threads
        "_thread",
        "concurrent",
        "multiprocessing",
        "pty",
        "queue",
        "sched",
        "signal",
        "subprocess",
        "threading",
    }
)

# Known exceptions, each to be removed once fixed: (module, import).
KNOWN: frozenset[tuple[str, str]] = frozenset()


def _modules() -> Iterator[tuple[str, Path]]:
    for layer in PURE_LAYERS:
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def _imports(module: str, path: Path) -> Iterator[str]:
    """Every module `path` imports, anywhere in it (function bodies too), relative ones resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                yield f"{base}.{node.module}" if node.module else base
            else:
                yield node.module or ""


def _forbidden(name: str) -> bool:
    parts = name.split(".")
    return any(".".join(parts[:i]) in FORBIDDEN for i in range(1, len(parts) + 1))


def _outside(name: str) -> bool:
    """A kubesched module outside the pure layers."""
    parts = name.split(".")
    return parts[0] == "kubesched" and (len(parts) == 1 or parts[1] not in PURE_LAYERS)


MODULES = list(_modules())


def test_the_pure_layers_are_found() -> None:
    names = {name for name, _ in MODULES}
    assert {"kubesched.algorithm.generic", "kubesched.model.duration", "kubesched.plugins.framework"} <= names


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[name for name, _ in MODULES])
def test_a_pure_module_imports_no_io(module: str, path: Path) -> None:
    found = set(_imports(module, path))
    io = sorted(name for name in found if _forbidden(name) and (module, name) not in KNOWN)
    assert io == [], f"{module} imports {', '.join(io)}"
    # Another kubesched module would bring its own imports along.
    outside = sorted(name for name in found if _outside(name))
    assert outside == [], f"{module} imports {', '.join(outside)}, outside {', '.join(PURE_LAYERS)}"


@pytest.mark.parametrize(
    ("name", "forbidden"),
    [
        ("http.client", True),
        ("concurrent.futures", True),
        ("os.path", True),
        ("urllib.request", True),
        ("urllib.parse", False),
        ("osmium", False),
        ("json", False),
        ("collections.abc", False),
    ],
)
def test_forbidden_names_match_whole_modules(name: str, forbidden: bool) -> None:
    assert _forbidden(name) is forbidden
