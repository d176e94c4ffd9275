"""Quantity parsing (apimachinery resource.Quantity): exact values, suffix scaling, rounding up,
rejection of malformed strings. Property tests with hypothesis."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesched.model.quantity import QuantityError, milli_value, parse_quantity, value

BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(1000),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
SUFFIXES = {**BINARY, **DECIMAL}
numbers = st.integers(min_value=0, max_value=10**12)


@given(numbers, st.sampled_from(sorted(SUFFIXES)), st.sampled_from(["", "+"]))
def test_suffix_scaling(number: int, suffix: str, sign: str) -> None:
    assert parse_quantity(f"{sign}{number}{suffix}") == number * SUFFIXES[suffix]


@given(numbers, st.integers(min_value=0, max_value=9999), st.integers(min_value=1, max_value=4))
def test_decimal_fractions_are_exact(whole: int, frac: int, width: int) -> None:
    digits = str(frac).zfill(width)[:width]
    text = f"{whole}.{digits}"
    assert parse_quantity(text) == Fraction(whole) + Fraction(int(digits), 10**width)
    assert parse_quantity(text + "Gi") == parse_quantity(text) * 2**30


@given(numbers, st.integers(min_value=-30, max_value=30), st.sampled_from(["e", "E"]))
def test_exponents(number: int, exponent: int, letter: str) -> None:
    assert parse_quantity(f"{number}{letter}{exponent}") == number * Fraction(10) ** exponent


@given(st.integers(min_value=0, max_value=10**15))
def test_round_trips(units: int) -> None:
    # millicores written with the m suffix, as a decimal, or as an exponent all mean the same
    assert milli_value(parse_quantity(f"{units}m")) == units
    decimal = f"{units // 1000}.{units % 1000:03d}"
    assert parse_quantity(decimal) == parse_quantity(f"{units}m") == parse_quantity(f"{units}e-3")
    # bytes
    assert value(parse_quantity(str(units))) == units
    assert value(parse_quantity(units)) == units


def canonical(amount: int) -> str:
    """An amount of bytes written with the largest binary suffix that divides it, as kubectl prints."""
    for suffix, scale in sorted(BINARY.items(), key=lambda item: -item[1]):
        if amount and amount % scale == 0:
            return f"{amount // scale}{suffix}"
    return str(amount)


@given(st.integers(min_value=0, max_value=2**20), st.sampled_from([1, *BINARY.values()]))
def test_canonical_strings_round_trip(number: int, scale: int) -> None:
    amount = number * scale
    text = canonical(amount)
    assert value(parse_quantity(text)) == amount
    assert canonical(value(parse_quantity(text))) == text


@given(st.integers(min_value=1, max_value=10**9), st.integers(min_value=1, max_value=999))
def test_value_and_milli_value_round_up(whole: int, thousandths: int) -> None:
    quantity = parse_quantity(f"{whole}.{thousandths:03d}")
    assert value(quantity) == whole + 1
    assert milli_value(quantity) == whole * 1000 + thousandths
    assert milli_value(parse_quantity(f"{whole}n")) == -(-whole // 10**6)  # ceil


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100m", Fraction(1, 10)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("0.5", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("1.", Fraction(1)),  # apimachinery accepts a trailing dot ("1.G" too)
        ("1.G", Fraction(10**9)),
        ("-1", Fraction(-1)),
        ("1E", Fraction(10**18)),  # E alone is exa, not an exponent
        ("1E3", Fraction(1000)),
        ("0", Fraction(0)),
        ("000100", Fraction(100)),
    ],
)
def test_known_values(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "1 ",
        " 1",
        "abc",
        "1KI",
        "1kb",
        "1K",
        "1 Mi",
        "1e",
        "e3",
        "--1",
        "1.2.3",
        "Mi",
        "1Mi1",
        "0x10",
        "1e3Mi",
        ".",
    ],
)
def test_garbage_is_rejected(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@given(numbers, st.sampled_from(sorted(SUFFIXES)), st.sampled_from(list("xXyQ!/ _B")))
def test_trailing_garbage_is_rejected(number: int, suffix: str, junk: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(f"{number}{suffix}{junk}")


@pytest.mark.parametrize("bad", [True, None, float("nan"), float("inf"), [1]])
def test_non_quantities_are_rejected(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)  # type: ignore[arg-type]


def test_identical_requests_read_alike_and_malformed_amounts_are_refused_every_time() -> None:
    # Container requests are worked out once per distinct set of strings (model/resources.py); what
    # is not all strings is worked out each time: True equals 1 as a key, but is no quantity.
    from kubesched.model.objects import pod_requests

    def spec(requests: dict[str, object]) -> dict[str, object]:
        return {"containers": [{"resources": {"requests": requests}}, {"resources": {"requests": requests}}]}

    first = pod_requests(spec({"cpu": "250m", "memory": "64Mi"}))
    assert pod_requests(spec({"cpu": "250m", "memory": "64Mi"})) == first
    assert (first[0].milli_cpu, first[0].memory, first[1], first[2]) == (500, 128 << 20, 500, 128 << 20)
    assert pod_requests(spec({"cpu": 1}))[0].milli_cpu == 2000
    for _ in range(2):
        with pytest.raises(QuantityError):
            pod_requests(spec({"cpu": True}))
        with pytest.raises(QuantityError):
            pod_requests(spec({"cpu": "-1"}))


def test_identical_resource_lists_read_alike_and_malformed_ones_are_refused_every_time() -> None:
    # A node's allocatable (and any ResourceList of strings) is converted once per distinct list.
    from kubesched.model.resources import resource_from_list

    first = resource_from_list({"cpu": "4", "memory": "8Gi", "pods": "110", "example.com/gpu": "2"})
    again = resource_from_list({"cpu": "4", "memory": "8Gi", "pods": "110", "example.com/gpu": "2"})
    assert again is first
    assert (first.milli_cpu, first.memory, first.allowed_pods, dict(first.scalar)) == (
        4000,
        8 << 30,
        110,
        {"example.com/gpu": 2},
    )
    assert resource_from_list({"cpu": 1}).milli_cpu == 1000
    for _ in range(2):
        for bad in ({"cpu": True}, {"cpu": "-1"}, {"memory": "1Qi"}):
            with pytest.raises(QuantityError):
                resource_from_list(bad)
