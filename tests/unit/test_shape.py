"""The shape kit (model/shape.py): what it accepts, and the path and wording of what it refuses."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from kubesched.model.shape import FieldError, array, boolean, integer, join, known_fields, mapping, string


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        (lambda v: mapping(v, "a.b"), [], "a.b: must be an object, got []"),
        (
            lambda v: mapping(v, "a", expected="an object with a name"),
            "x",
            "a: must be an object with a name, got 'x'",
        ),
        (lambda v: array(v, "a"), {}, "a: must be a list, got {}"),
        (
            lambda v: array(v, "a", of="strings", shown=json.dumps),
            None,
            "a: must be a list of strings, got null",
        ),
        (lambda v: boolean(v, "a"), "yes", "a: must be true or false, got 'yes'"),
        (lambda v: string(v, "a"), "", "a: must be a non-empty string, got ''"),
        (lambda v: string(v, "a", empty_ok=True), 5, "a: must be a string, got 5"),
        (lambda v: integer(v, "a"), True, "a: must be an integer, got True"),
        (lambda v: integer(v, "a", 0, 10), 11, "a: must be between 0 and 10, got 11"),
        (lambda v: integer(v, "a", 0), -1, "a: must be at least 0, got -1"),
        (lambda v: integer(v, "a", high=3), 4, "a: must be at most 3, got 4"),
        (
            lambda v: known_fields(v, ("name", "weight"), "x[1]"),
            {"nme": 1},
            "x[1].nme: unknown field (accepted: name, weight)",
        ),
        (lambda v: mapping(v, ""), 3, "must be an object, got 3"),
    ],
)
def test_a_refusal_names_the_field_and_what_it_must_be(
    check: Callable[[Any], Any], value: Any, message: str
) -> None:
    with pytest.raises(FieldError) as caught:
        check(value)
    assert str(caught.value) == message


def test_null_is_the_zero_value_only_where_allowed() -> None:
    assert mapping(None, "a", null_ok=True) == {}
    assert array(None, "a", null_ok=True) == []
    assert string(None, "a", null_ok=True) == ""
    assert integer(None, "a", null_ok=True) == 0
    with pytest.raises(FieldError):
        string(None, "a")


def test_go_field_names_match_in_any_case_under_their_accepted_spelling() -> None:
    assert known_fields({"enableHttps": True}, ("enableHTTPS",), any_case=True) == {"enableHTTPS": True}
    with pytest.raises(FieldError, match="unknown field"):
        known_fields({"enableHttps": True}, ("enableHTTPS",))


def test_paths_join_and_errors_move_under_a_prefix() -> None:
    assert [join("a", "b"), join("a", 2), join("a", "[2].b"), join("", "b"), join("a", "")] == [
        "a.b",
        "a[2]",
        "a[2].b",
        "b",
        "a",
    ]
    error = FieldError("[0].weight", "must be an integer, got 'x'").under("extenders")
    assert (error.field, str(error)) == (
        "extenders[0].weight",
        "extenders[0].weight: must be an integer, got 'x'",
    )
    assert FieldError("", "no").under("spec").field == "spec"


def test_an_error_survives_pickling() -> None:
    copy = pickle.loads(pickle.dumps(FieldError("a.b", "wrong")))
    assert (type(copy), copy.field, copy.message, str(copy)) == (FieldError, "a.b", "wrong", "a.b: wrong")
