"""What this build is: the package version and the source revision it was built from."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from kubesched import __version__


def source_revision() -> str:
    """The commit this code comes from: $KUBESCHED_REVISION (the image sets it from its build argument),
    else HEAD of the git checkout the package is imported from (an editable install), else "unknown"."""
    revision = os.environ.get("KUBESCHED_REVISION", "").strip()
    if revision:
        return revision
    package = Path(__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            result = subprocess.run(
                ["git", *args], cwd=package, capture_output=True, text=True, timeout=2, check=False
            )
        except (OSError, subprocess.SubprocessError):  # no git, or it hung
            return None
        return result.stdout.strip() if result.returncode == 0 else None

    # A copy installed into site-packages inside another repository (a project's .venv) is not
    # tracked there, and that repository's HEAD says nothing about this code.
    if git("ls-files", "--error-unmatch", "--", "__init__.py") is None:
        return "unknown"
    return git("rev-parse", "HEAD") or "unknown"


def version_line() -> str:
    """`kubesched 0.1.0 (revision <commit>)`."""
    return f"kubesched {__version__} (revision {source_revision()})"
