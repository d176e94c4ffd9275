"""Durations as Go writes them ("15s", "1m30s", "500ms", ".5h"), read into seconds.

One grammar, Go's `time.ParseDuration`: an optional sign, then one or more decimal numbers each
with a unit (ns, us, µs, μs, ms, s, m, h); "0" needs no unit. Values are summed as floats in
seconds rather than Go's integer nanoseconds: fractions below a nanosecond are kept, and there is
no 290-year limit. The callers add their own forms on top: bare numbers of seconds for the
command line's flags (`parse_duration`), integer nanoseconds for an extender's `httpTimeout`.
"""

from __future__ import annotations

import math
import re
from typing import Final

_UNIT_SECONDS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 MICRO SIGN
    "μs": 1e-6,  # U+03BC GREEK SMALL LETTER MU
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
# "ms" before "m" and "s", so that the longest unit wins.
_PART: Final = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION: Final = re.compile(rf"([-+]?)((?:{_PART.pattern})+|0)")
EXAMPLES: Final = "examples: 15s, 1m30s, 500ms"


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration string (time.ParseDuration's grammar); raises ValueError."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration ({EXAMPLES})")
    sign, body = match.group(1, 2)
    seconds = sum((float(number) * _UNIT_SECONDS[unit] for number, unit in _PART.findall(body)), 0.0)
    if not math.isfinite(seconds):
        raise ValueError(f"{text!r} is not a duration: out of range")
    return 0.0 - seconds if sign == "-" else seconds  # "-0" is 0, not -0.0


def parse_duration(text: str) -> float:
    """Seconds in a command-line duration: a Go duration, or a bare number of seconds ("2", "0.5")."""
    text = text.strip()
    try:
        number = float(text)
    except ValueError:
        return parse_go_duration(text)
    if not math.isfinite(number):
        raise ValueError(f"{text!r} is not a duration")
    return number


__all__ = ["parse_duration", "parse_go_duration"]
