"""The wheel and the image carry the scheduler only: the local control plane and the test fixtures
live in hack/kubesched_dev, which the package never imports."""

from __future__ import annotations

import ast
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_is_kubesched_alone() -> None:
    packages = find_packages(where=str(ROOT / "operator"))
    assert packages and all(p == "kubesched" or p.startswith("kubesched.") for p in packages), packages


def test_no_module_of_the_package_imports_the_development_package() -> None:
    offenders = []
    for path in sorted((ROOT / "operator" / "kubesched").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            rel = path.relative_to(ROOT)
            offenders += [f"{rel}: {n}" for n in names if n.split(".")[0] == "kubesched_dev"]
    assert offenders == []


def test_the_image_copies_nothing_from_hack_or_tests() -> None:
    context = (ROOT / ".dockerignore").read_text().split()
    assert "*" in context  # everything is left out of the build context but what is named
    assert not [line for line in context if line.startswith("!") and ("hack" in line or "tests" in line)]
