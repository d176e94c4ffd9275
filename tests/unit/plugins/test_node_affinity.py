"""MatchNodeSelector (nodeaffinity filter): nodeSelector AND required node affinity; and
NodeAffinityPriority (nodeaffinity/node_affinity.go). Rows marked "1.20 table" are cases of the
1.20 Go tests with their expected scores."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.plugins.node_affinity.filtering import ERR_REASON_NODE_AFFINITY, MatchNodeSelector
from kubesched.plugins.node_affinity.scoring import NodeAffinityPriority
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter, run_priority

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
    info = node_info(model_node("node-1", labels=LABELS))
    assert run_filter(MatchNodeSelector(), model_pod(**spec), info) == expected


def preferred(weight: int, key: str, values: list[str]) -> dict[str, Any]:
    return {
        "weight": weight,
        "preference": {"matchExpressions": [{"key": key, "operator": "In", "values": values}]},
    }


ALL_THREE = {
    "weight": 5,
    "preference": {
        "matchExpressions": [
            {"key": "foo", "operator": "In", "values": ["bar"]},
            {"key": "key", "operator": "In", "values": ["value"]},
            {"key": "az", "operator": "In", "values": ["az1"]},
        ]
    },
}


@pytest.mark.parametrize(
    ("terms", "labels", "expected"),
    [
        pytest.param([], [{"foo": "bar"}, {"key": "value"}], [0, 0], id="1.20 table: no preferences"),
        pytest.param(
            [preferred(2, "foo", ["bar"])],
            [{"foo": "bar"}, {"key": "value"}, {"az": "az1"}],
            [100, 0, 0],
            id="1.20 table: only one node matches",
        ),
        pytest.param(
            [preferred(2, "foo", ["bar"]), preferred(4, "key", ["value"]), ALL_THREE],
            [{"foo": "bar"}, {"foo": "bar", "key": "value", "az": "az1"}, {"key": "value"}],
            [18, 100, 36],
            id="1.20 table: all machines match the preferences but with different priorities",
        ),
        pytest.param(
            [{**preferred(1, "foo", ["bar"]), "weight": 0}], [{"foo": "bar"}], [0], id="weight 0 ignored"
        ),
    ],
)
def test_node_affinity_priority(terms: list[Any], labels: list[dict[str, str]], expected: list[int]) -> None:
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}
    infos = [node_info(model_node(f"n{i}", labels=node_labels)) for i, node_labels in enumerate(labels)]
    assert run_priority(NodeAffinityPriority(), model_pod(affinity=affinity), infos) == expected
