"""Reading legacy Policy files (kube-scheduler's --policy-config-file) from disk, at the edge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubesched.policy.compile import PolicyError, parse_policy_text


def load_policy_file(path: str | Path) -> dict[str, Any]:
    """Read a Policy file (JSON or YAML); raises PolicyError naming the file when it is unusable."""
    return parse_policy_text(read_policy_text(path), str(path))


def read_policy_text(path: str | Path) -> str:
    """A Policy file's text; raises PolicyError naming the file when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(str(path), f"cannot read policy file: {exc}") from exc


__all__ = ["load_policy_file", "read_policy_text"]
