"""Label selectors and node selector terms: operators, validation errors, Nothing vs Everything."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kubesched.model.selectors import (
    EVERYTHING,
    NOTHING,
    LabelSelector,
    NodeSelector,
    Requirement,
    SelectorError,
    parse_int64,
)

POD_LABELS = {"app": "web", "tier": "front", "version": "3"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ({}, True),  # an empty selector selects everything
        ({"matchLabels": {"app": "web"}}, True),
        ({"matchLabels": {"app": "db"}}, False),
        ({"matchLabels": {"app": "web", "tier": "back"}}, False),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "web"]}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, True),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}],
            },
            False,
        ),
    ],
)
def test_label_selector_operators(selector: dict[str, Any], matches: bool) -> None:
    assert LabelSelector.parse(selector).matches(POD_LABELS) is matches


def test_nil_selector_matches_nothing_and_empty_matches_everything() -> None:
    assert LabelSelector.parse(None) is NOTHING
    assert not NOTHING.matches({}) and not NOTHING.empty
    assert LabelSelector.parse({}).empty and LabelSelector.parse({}).matches({"a": "b"})
    assert LabelSelector.from_map({}) is EVERYTHING
    assert LabelSelector.from_map({"app": "web"}).matches(POD_LABELS)
    assert not LabelSelector.from_map({"app": "web", "x": ""}).matches(POD_LABELS)


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
            "not a valid pod selector operator",
        ),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "values set can't be empty"),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            "must be empty for exists",
        ),
        ({"matchLabels": {"-bad": "x"}}, "invalid label key '-bad'"),
        ({"matchLabels": {"Example.com/app": "x"}}, "prefix part must be a lowercase RFC 1123 subdomain"),
        ({"matchLabels": {"a/b/c": "x"}}, "at most one '/'"),
        ({"matchLabels": {"app": "has space"}}, "invalid label value"),
        ({"matchLabels": {"app": "x" * 64}}, "no more than 63 characters"),
    ],
)
def test_label_selector_validation(selector: dict[str, Any], message: str) -> None:
    with pytest.raises(SelectorError, match=message):
        LabelSelector.parse(selector)


@pytest.mark.parametrize(
    ("operator", "values", "message"),
    [
        ("Gt", ["1.5"], "the value must be an integer"),
        ("Lt", ["1", "2"], "exactly one value is required"),
        ("Gt", [], "exactly one value is required"),
        ("Gt", ["9223372036854775808"], "the value must be an integer"),  # overflows int64
        ("Gt", ["-5"], "invalid label value"),  # a valid integer but not a valid label value
        ("Near", ["a"], "not a valid node selector operator"),
    ],
)
def test_node_selector_validation(operator: str, values: list[str], message: str) -> None:
    selector = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": operator, "values": values}]}]
    }
    with pytest.raises(SelectorError, match=message):
        NodeSelector.parse(selector, strict=True)
    lazy = NodeSelector.parse(selector)  # lazily: the term is kept, with its error, and never matches
    assert len(lazy.errors) == 1 and message in lazy.errors[0]
    assert not lazy.matches({"k": "1"}, "n")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ([{"key": "metadata.name", "operator": "Exists"}], "not a valid node field selector operator"),
        (
            [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}],
            "unexpected number of value \\(2\\)",
        ),
    ],
)
def test_node_field_validation(fields: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(SelectorError, match=message):
        NodeSelector.parse({"nodeSelectorTerms": [{"matchFields": fields}]}, strict=True)


@pytest.mark.parametrize(
    ("operator", "bound", "label", "matches"),
    [
        ("Gt", "5", "6", True),
        ("Gt", "5", "5", False),
        ("Lt", "5", "4", True),
        ("Lt", "5", "+4", True),  # strconv.ParseInt accepts a sign
        ("Lt", "5", "4.0", False),
        ("Lt", "5", "0x4", False),
        ("Lt", "5", "1_0", False),  # Python's int() would accept this, Go's ParseInt does not
        ("Gt", "5", "", False),
    ],
)
def test_gt_lt(operator: str, bound: str, label: str, matches: bool) -> None:
    requirement = Requirement.build("k", operator, [bound])
    assert requirement.matches({"k": label}) is matches
    assert not requirement.matches({})


def test_parse_int64_bounds() -> None:
    assert parse_int64("9223372036854775807") == 2**63 - 1
    assert parse_int64("-9223372036854775808") == -(2**63)
    assert parse_int64("9223372036854775808") is None
    assert parse_int64(" 1") is None


def test_field_selector_on_a_nameless_node_is_ignored() -> None:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}
    selector = NodeSelector.parse({"nodeSelectorTerms": [term]})
    assert selector.matches({}, "a")
    assert not selector.matches({}, "b")
    assert selector.matches({}, "")  # extractNodeFields gives no fields: matchFields is skipped


@pytest.mark.parametrize(
    ("text", "labels", "matches"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web,tier!=db", {"app": "web", "tier": "db"}, False),
        ("app==web,tier!=db", {"app": "web"}, True),
        ("env in (a, b),!legacy", {"env": "b"}, True),
        ("env in (a, b),!legacy", {"env": "b", "legacy": ""}, False),
        ("env notin (a,b)", {"env": "b"}, False),
        ("env notin (a,b)", {}, True),
        ("app", {}, False),
        ("  ", {"app": "x"}, True),
    ],
)
def test_label_selector_from_kubectl_syntax(text: str, labels: dict[str, str], matches: bool) -> None:
    assert LabelSelector.from_string(text).matches(labels) is matches


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("app=(web", "cannot parse 'app=(web'"),
        ("app=web,", "cannot parse ''"),
        ("env in ()", "values set can't be empty"),
        ("app=-web", "a valid label must be"),
        ("-app", "name part must consist of"),
    ],
)
def test_a_malformed_string_selector_names_its_clause(text: str, message: str) -> None:
    with pytest.raises(SelectorError, match=re.escape(message)):
        LabelSelector.from_string(text)
