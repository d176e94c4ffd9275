"""Checking the shape of decoded JSON or YAML: legacy Policies, plugin arguments,
KubeSchedulerConfigurations, extender entries and extender replies all go through these.

Each check returns the value it vouched for, or raises FieldError naming the path of the offending
field (`priorities[2].argument.shape[1].score`) and what was wrong, the wrong value quoted by
`shown` (repr by default; extender replies quote JSON). A caller that knows where its input sits
in a larger document puts its own path in front (`FieldError.under`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self

Shown = Callable[[Any], str]


class FieldError(ValueError):
    """Input of the wrong shape; `field` is the path of the offending field ("" for the whole input)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.field, self.message))

    def under(self, prefix: str) -> Self:
        """The same error, its path put under `prefix`."""
        return type(self)(join(prefix, self.field), self.message)


def join(path: str, name: str | int) -> str:
    """`path.name`, `path[name]` for an index (or a name that starts with one), or whichever is set."""
    if isinstance(name, int):
        return f"{path}[{name}]"
    if not path or not name:
        return path or name
    return f"{path}{name}" if name.startswith("[") else f"{path}.{name}"


def wrong(path: str, expected: str, value: Any, shown: Shown = repr) -> FieldError:
    """`path: must be <expected>, got <value>`."""
    return FieldError(path, f"must be {expected}, got {shown(value)}")


def is_int(value: Any) -> bool:
    """An integer, and not a bool (which Python counts as one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def mapping(
    value: Any, path: str, *, null_ok: bool = False, expected: str = "an object", shown: Shown = repr
) -> Mapping[str, Any]:
    """An object; with `null_ok`, None (absent or null) is an empty one."""
    if value is None and null_ok:
        return {}
    if not isinstance(value, Mapping):
        raise wrong(path, expected, value, shown)
    return value


def array(value: Any, path: str, *, null_ok: bool = False, of: str = "", shown: Shown = repr) -> list[Any]:
    """A list (`of` says of what, for the message); with `null_ok`, None is an empty one."""
    if value is None and null_ok:
        return []
    if not isinstance(value, list):
        raise wrong(path, f"a list of {of}" if of else "a list", value, shown)
    return value


def boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise wrong(path, "true or false", value)
    return value


def string(
    value: Any, path: str, *, empty_ok: bool = False, null_ok: bool = False, shown: Shown = repr
) -> str:
    """A string, not empty unless `empty_ok`; with `null_ok`, None is ""."""
    if value is None and null_ok:
        return ""
    if not isinstance(value, str) or not (value or empty_ok):
        raise wrong(path, "a string" if empty_ok else "a non-empty string", value, shown)
    return value


def integer(
    value: Any,
    path: str,
    low: int | None = None,
    high: int | None = None,
    *,
    null_ok: bool = False,
    shown: Shown = repr,
) -> int:
    """An integer within [low, high] where they are given; with `null_ok`, None is 0."""
    if value is None and null_ok:
        return 0
    if not is_int(value):
        raise wrong(path, "an integer", value, shown)
    if (low is not None and value < low) or (high is not None and value > high):
        if low is not None and high is not None:
            expected = f"between {low} and {high}"
        else:
            expected = f"at least {low}" if low is not None else f"at most {high}"
        raise wrong(path, expected, value, shown)
    return int(value)


def known_fields(
    value: Mapping[str, Any], accepted: Iterable[str], path: str = "", *, any_case: bool = False
) -> dict[str, Any]:
    """`value` when all its keys are `accepted`; with `any_case` (Go's encoding/json), keys are matched
    case-insensitively and returned under their accepted spelling."""
    accepted = tuple(accepted)
    by_key = {(name.lower() if any_case else name): name for name in accepted}
    found: dict[str, Any] = {}
    for key, item in value.items():
        name = by_key.get(str(key).lower() if any_case else key)
        if name is None:
            raise FieldError(join(path, str(key)), f"unknown field (accepted: {', '.join(accepted)})")
        found[name] = item
    return found


__all__ = [
    "FieldError",
    "Shown",
    "array",
    "boolean",
    "integer",
    "is_int",
    "join",
    "known_fields",
    "mapping",
    "string",
    "wrong",
]
