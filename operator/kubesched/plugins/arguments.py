"""Checking the `argument` objects of a legacy Policy's predicates and priorities (model/shape.py's kit).

Factories raise ArgumentError naming the offending field relative to the argument (e.g.
`shape[1].score`); the policy compiler prefixes the entry's path, so a user reads
`priorities[2].argument.requestedToCapacityRatioArguments.shape[1].score: ...`.
"""

from __future__ import annotations

from typing import Any

from kubesched.model.shape import FieldError, string

# The one error of the shape kit, under the name the plugins' factories raise and the registry catches.
ArgumentError = FieldError


def label_list(value: Any, field: str) -> tuple[str, ...]:
    """A non-empty list of label keys."""
    if not isinstance(value, list) or not value:
        raise ArgumentError(field, f"must be a non-empty list of label keys, got {value!r}")
    for i, label in enumerate(value):
        string(label, f"{field}[{i}]")
    return tuple(value)


def in_context(field: str, error: ArgumentError) -> ArgumentError:
    """The same error with `field` put in front of its path."""
    return error.under(field)
