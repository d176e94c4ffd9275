"""The wheel and the image carry the scheduler only: the local control plane and the test fixtures
live in hack/kubesched_dev, which the package never imports."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from setuptools import find_packages

import kubesched

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


def _pins() -> dict[str, str]:
    """The lock's `name==version` lines, by normalised name."""
    pins = {}
    for line in (ROOT / "requirements" / "constraints.txt").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith((" ", "#")):
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return pins


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]).lower()


def test_the_lock_pins_every_dependency_the_build_backend_and_pip() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = [*project["project"]["dependencies"], *project["build-system"]["requires"], "pip"]
    wanted += [r for extra in project["project"]["optional-dependencies"].values() for r in extra]
    pins = _pins()
    assert [r for r in wanted if _name(r) not in pins] == []
    # The lock's build input repeats [build-system] `requires`: the two must not drift apart.
    build_in = [
        line for line in (ROOT / "requirements" / "build.in").read_text().splitlines() if line[:1].isalpha()
    ]
    assert sorted(map(_name, project["build-system"]["requires"])) == sorted(
        _name(r) for r in build_in if _name(r) != "pip"
    )


def test_every_pip_install_of_the_image_takes_the_lock_and_builds_without_isolation() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    installs = re.findall(r"pip install ([^&\n]+)", dockerfile)
    assert len(installs) == 2, installs
    assert all("-c requirements/constraints.txt" in i for i in installs), installs
    assert "--no-build-isolation" in installs[-1] and installs[-1].rstrip().endswith(" ."), installs


def test_the_package_version_is_pyprojects() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert kubesched.__version__ == project["project"]["version"]
