"""Durations: Go's time.ParseDuration grammar, the command line's flags, and an extender's httpTimeout."""

from __future__ import annotations

from typing import Any

import click
import pytest

from kubesched.algorithm.extenders import DEFAULT_TIMEOUT
from kubesched.cli import Duration
from kubesched.model.duration import parse_duration, parse_go_duration
from kubesched.plugins.arguments import ArgumentError
from kubesched.policy.extenders import parse_http_timeout

# (text, seconds): what Go's time.ParseDuration accepts.
GO_DURATIONS = [
    ("15s", 15.0),
    ("1m30s", 90.0),
    ("500ms", 0.5),
    ("1.5h", 5400.0),
    (".5s", 0.5),
    ("1.s", 1.0),
    ("0", 0.0),
    ("0s", 0.0),
    ("-0", 0.0),
    ("2h45m", 9900.0),
    ("1h0m0s", 3600.0),
    ("1ms500us", 0.0015),
    ("100ns", 1e-7),
    ("3µs", 3e-6),  # U+00B5 MICRO SIGN
    ("3μs", 3e-6),  # U+03BC GREEK SMALL LETTER MU
    ("-1.5h", -5400.0),
    ("+5s", 5.0),
]

# Refused by Go as well: no unit, blanks, unknown or upper-case units, no number, exponents.
NOT_GO_DURATIONS = [
    "",
    "1",
    "15",
    "s",
    ".s",
    "-",
    "15 s",
    " 15s",
    "15s ",
    "fifteen",
    "15x",
    "5S",
    "1.5.5s",
    "1e3s",
    "1h-30m",
    "inf",
    "nan",
    "\u0661s",  # ARABIC-INDIC DIGIT ONE: Go reads ASCII digits only
    "9" * 400 + "h",  # overflows
]


@pytest.mark.parametrize(("text", "seconds"), GO_DURATIONS)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds, abs=1e-12)


@pytest.mark.parametrize("text", NOT_GO_DURATIONS)
def test_what_go_refuses_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_go_duration(text)


def test_minus_zero_is_zero() -> None:
    assert str(parse_go_duration("-0")) == "0.0"


# The flags also take a bare number of seconds, and blanks around the value.
FLAG_DURATIONS = [
    *GO_DURATIONS,
    ("2", 2.0),
    ("1.5", 1.5),
    ("0", 0.0),
    ("-1", -1.0),
    (" 10s ", 10.0),
]


@pytest.mark.parametrize(("text", "seconds"), FLAG_DURATIONS)
def test_flag_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, abs=1e-12)


@pytest.mark.parametrize("text", ["", " ", "s", "15 s", "fifteen", "15x", "inf", "-inf", "nan", "1e400"])
def test_nonsense_flag_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


def test_the_command_line_duration_type() -> None:
    duration = Duration()
    assert duration.convert("1m30s", None, None) == 90.0
    assert duration.convert(2, None, None) == 2.0  # a default given as a number
    with pytest.raises(click.BadParameter, match=r"'15x' is not a duration \(examples: 15s, 1m30s, 500ms\)"):
        duration.convert("15x", None, None)


# An extender's httpTimeout: Go's integer nanoseconds (the legacy Policy's time.Duration) or a Go
# duration string; 0 means the default.
HTTP_TIMEOUTS: list[tuple[Any, float]] = [
    (1_500_000_000, 1.5),
    (300_000_000, 0.3),
    ("250ms", 0.25),
    ("2s", 2.0),
    (".5s", 0.5),
    ("1m", 60.0),
    (0, DEFAULT_TIMEOUT),
    ("0", DEFAULT_TIMEOUT),
    ("0s", DEFAULT_TIMEOUT),
]


@pytest.mark.parametrize(("value", "seconds"), HTTP_TIMEOUTS)
def test_http_timeouts(value: Any, seconds: float) -> None:
    assert parse_http_timeout(value, "httpTimeout") == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("soon", "must be a duration (integer nanoseconds or e.g. \"5s\"), got 'soon'"),
        ("5", "must be a duration"),  # a string needs its unit
        (1.5, "must be a duration"),  # nanoseconds are an integer
        (True, "must be a duration"),
        (None, "must be a duration"),
        ([], "must be a duration"),
        (-1, "must not be negative, got -1"),
        ("-1s", "must not be negative, got '-1s'"),
    ],
)
def test_bad_http_timeouts(value: Any, message: str) -> None:
    with pytest.raises(ArgumentError) as caught:
        parse_http_timeout(value, "httpTimeout")
    assert caught.value.field == "httpTimeout"
    assert message in caught.value.message
