"""Checking the `argument` objects of a legacy Policy's predicates and priorities.

Factories raise ArgumentError naming the offending field relative to the argument (e.g.
`shape[1].score`); the policy compiler prefixes the entry's path, so a user reads
`priorities[2].argument.requestedToCapacityRatioArguments.shape[1].score: ...`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class ArgumentError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def require_object(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ArgumentError(field, f"must be an object, got {value!r}")
    return value


def check_fields(argument: Mapping[str, Any], allowed: Iterable[str], path: str = "") -> None:
    allowed = tuple(allowed)
    for key in argument:
        if key not in allowed:
            where = f"{path}.{key}" if path else str(key)
            raise ArgumentError(where, f"unknown field (accepted: {', '.join(allowed)})")


def require_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ArgumentError(field, f"must be true or false, got {value!r}")
    return value


def require_str(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ArgumentError(field, f"must be a non-empty string, got {value!r}")
    return value


def require_int(value: Any, field: str) -> int:
    if not _is_int(value):
        raise ArgumentError(field, f"must be an integer, got {value!r}")
    return int(value)


def label_list(value: Any, field: str) -> tuple[str, ...]:
    """A non-empty list of label keys."""
    if not isinstance(value, list) or not value:
        raise ArgumentError(field, f"must be a non-empty list of label keys, got {value!r}")
    for i, label in enumerate(value):
        require_str(label, f"{field}[{i}]")
    return tuple(value)


def in_context(field: str, error: ArgumentError) -> ArgumentError:
    """The same error with `field` put in front of its path."""
    return ArgumentError(f"{field}.{error.field}" if error.field else field, error.message)
