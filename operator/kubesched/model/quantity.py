"""Kubernetes resource quantities ("100m", "1.5Gi", "1e3"), parsed exactly as apimachinery does."""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# <sign><digits>[.<digits>] or <sign>.<digits>, then a suffix: binary SI, decimal SI or an exponent.
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)
# The pattern apimachinery's error message quotes.
_API_PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
# apimachinery refuses exponents this large; so do we, rather than build giant integers.
_MAX_EXPONENT = 100
# Distinct quantities remembered: a cluster's pods and nodes repeat a few hundred ("100m", "128Mi"),
# and exact Fraction arithmetic, done afresh for each, would dominate feeding a large cluster in.
_CACHED = 4096


class QuantityError(ValueError):
    """A string that is not a valid Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity into an exact fraction of base units (cores, bytes, counts)."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantity is not finite: {value!r}")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"quantity must be a string, got {type(value).__name__}")
    return _parse_text(value)


@functools.lru_cache(maxsize=_CACHED)
def _parse_text(value: str) -> Fraction:
    """parse_quantity of a string (Fractions are immutable: one parse serves every caller)."""
    match = _QUANTITY.match(value.strip())
    if match is None or value != value.strip() or not value:
        raise QuantityError(f"quantities must match the regular expression '{_API_PATTERN}', got {value!r}")
    number = Fraction(match["num"])
    if match["bin"]:
        return number * _BINARY[match["bin"]]
    if match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(f"quantity exponent out of range: {value!r}")
        return number * Fraction(10) ** exponent
    return number * _DECIMAL[match["dec"] or ""]


@functools.lru_cache(maxsize=_CACHED)
def value(quantity: Fraction) -> int:
    """Whole units rounded up, as Quantity.Value() does (bytes, counts)."""
    return math.ceil(quantity)


@functools.lru_cache(maxsize=_CACHED)
def milli_value(quantity: Fraction) -> int:
    """Thousandths rounded up, as Quantity.MilliValue() does (millicores)."""
    return math.ceil(quantity * 1000)
