"""MatchNodeSelector (nodeaffinity filter): nodeSelector AND required node affinity."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.plugins.node_affinity.filtering import ERR_REASON_NODE_AFFINITY, MatchNodeSelector

from .algofixtures import make_node, make_pod, node_info, run_filter

NO = (ERR_REASON_NODE_AFFINITY,)
LABELS = {"zone": "a", "disk": "ssd", "cores": "16"}


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def name_field(operator: str, *values: str) -> dict[str, Any]:
    return {"matchFields": [{"key": "metadata.name", "operator": operator, "values": list(values)}]}


@pytest.mark.parametrize(
    ("name", "spec", "expected"),
    [
        ("nothing asked", {}, ()),
        ("nodeSelector matches", {"nodeSelector": {"zone": "a", "disk": "ssd"}}, ()),
        ("nodeSelector value differs", {"nodeSelector": {"zone": "b"}}, NO),
        ("nodeSelector key missing", {"nodeSelector": {"gpu": ""}}, NO),
        ("In", {"affinity": required({"matchExpressions": [expr("zone", "In", "b", "a")]})}, ()),
        ("In misses", {"affinity": required({"matchExpressions": [expr("zone", "In", "b")]})}, NO),
        ("NotIn", {"affinity": required({"matchExpressions": [expr("zone", "NotIn", "b")]})}, ()),
        (
            "NotIn of a missing key matches",
            {"affinity": required({"matchExpressions": [expr("x", "NotIn", "b")]})},
            (),
        ),
        ("Exists", {"affinity": required({"matchExpressions": [expr("disk", "Exists")]})}, ()),
        ("DoesNotExist", {"affinity": required({"matchExpressions": [expr("disk", "DoesNotExist")]})}, NO),
        ("Gt", {"affinity": required({"matchExpressions": [expr("cores", "Gt", "15")]})}, ()),
        ("Gt is strict", {"affinity": required({"matchExpressions": [expr("cores", "Gt", "16")]})}, NO),
        ("Lt", {"affinity": required({"matchExpressions": [expr("cores", "Lt", "17")]})}, ()),
        (
            "Gt on a non-integer label",
            {"affinity": required({"matchExpressions": [expr("zone", "Gt", "1")]})},
            NO,
        ),
        (
            "expressions in a term are ANDed",
            {
                "affinity": required(
                    {"matchExpressions": [expr("zone", "In", "a"), expr("disk", "In", "hdd")]}
                )
            },
            NO,
        ),
        (
            "terms are ORed",
            {
                "affinity": required(
                    {"matchExpressions": [expr("zone", "In", "b")]},
                    {"matchExpressions": [expr("disk", "In", "ssd")]},
                )
            },
            (),
        ),
        (
            "nodeSelector AND affinity",
            {
                "nodeSelector": {"zone": "b"},
                "affinity": required({"matchExpressions": [expr("zone", "In", "a")]}),
            },
            NO,
        ),
        ("matchFields In", {"affinity": required(name_field("In", "node-1"))}, ()),
        ("matchFields In other node", {"affinity": required(name_field("In", "node-2"))}, NO),
        ("matchFields NotIn", {"affinity": required(name_field("NotIn", "node-2"))}, ()),
        (
            "matchFields AND matchExpressions in one term",
            {
                "affinity": required(
                    {**name_field("In", "node-1"), "matchExpressions": [expr("zone", "In", "b")]}
                )
            },
            NO,
        ),
        ("empty term list matches nothing", {"affinity": required()}, NO),
        ("an empty term is dropped, so matches nothing", {"affinity": required({})}, NO),
        (
            "requiredDuringScheduling present but empty matches nothing",
            {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}},
            NO,
        ),
        ("no required affinity", {"affinity": {"nodeAffinity": {}}}, ()),
        (
            "a term that does not parse never matches, the others still can",
            {
                "affinity": required(
                    {"matchExpressions": [expr("zone", "Gt", "a")]},
                    {"matchExpressions": [expr("zone", "In", "a")]},
                )
            },
            (),
        ),
        (
            "only an invalid term",
            {"affinity": required({"matchExpressions": [expr("zone", "Foo", "a")]})},
            NO,
        ),
    ],
)
def test_match_node_selector(name: str, spec: dict[str, Any], expected: tuple[str, ...]) -> None:
    info = node_info(make_node("node-1", labels=LABELS))
    assert run_filter(MatchNodeSelector(), make_pod(**spec), info) == expected
