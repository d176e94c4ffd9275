"""SelectorSpreadPriority (selectorspread): rows from 1.20's selector_spread_test.go with its
expected scores, plus namespace, terminating pod and invalid selector cases."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kubesched.model.nodeinfo import ClusterObjects
from kubesched.plugins.helper import snapshot_default_selector
from kubesched.plugins.selector_spread.scoring import SelectorSpreadPriority, default_selector
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_priority, snapshot

LABELS1 = {"foo": "bar", "baz": "blah"}
LABELS2 = {"bar": "foo", "baz": "blah"}
ZONE = "failure-domain.beta.kubernetes.io/zone"


def service(selector: dict[str, str] | None, namespace: str = "default") -> dict[str, Any]:
    spec = {} if selector is None else {"selector": selector}
    return {"metadata": {"name": "svc", "namespace": namespace}, "spec": spec}


def owner(selector: dict[str, Any] | None, namespace: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": "owner", "namespace": namespace}, "spec": {"selector": selector}}


def objects(**kinds: list[dict[str, Any]]) -> ClusterObjects:
    def keyed(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {f"{o['metadata']['namespace']}/{i}": o for i, o in enumerate(items)}

    return ClusterObjects(**{kind: keyed(items) for kind, items in kinds.items()})


def spread(
    pod_labels: dict[str, str] | None,
    placed: dict[str, list[dict[str, Any]]],
    objs: ClusterObjects,
    zones: dict[str, str] | None = None,
    namespace: str = "default",
    **pod_spec: Any,
) -> list[int]:
    """Scores of the nodes in `placed` (node name -> kwargs of the pods running there)."""
    infos = [
        node_info(
            model_node(name, labels={ZONE: zones[name]} if zones else {}),
            [model_pod(f"{name}-{i}", **kw) for i, kw in enumerate(pods)],
        )
        for name, pods in placed.items()
    ]
    pod = model_pod("new", namespace=namespace, labels=pod_labels, **pod_spec)
    return run_priority(SelectorSpreadPriority(), pod, infos, snapshot(*infos, objects=objs))


TWO_MACHINES = [
    ("nothing scheduled", None, {"m1": [], "m2": []}, objects(), [100, 100]),
    ("no services", LABELS1, {"m1": [{}], "m2": []}, objects(), [100, 100]),
    (
        "different services",
        LABELS1,
        {"m1": [{"labels": LABELS2}], "m2": []},
        objects(services=[service({"key": "value"})]),
        [100, 100],
    ),
    (
        "two pods, one service pod",
        LABELS1,
        {"m1": [{"labels": LABELS2}], "m2": [{"labels": LABELS1}]},
        objects(services=[service(LABELS1)]),
        [100, 0],
    ),
    (
        "pods of other namespaces do not count",
        LABELS1,
        {"m1": [{"labels": LABELS2}, {"labels": LABELS1, "namespace": "ns1"}], "m2": [{"labels": LABELS1}]},
        objects(services=[service(LABELS1)]),
        [100, 0],
    ),
    (
        "services of other namespaces do not select",
        LABELS1,
        {"m1": [], "m2": [{"labels": LABELS1}]},
        objects(services=[service(LABELS1, namespace="ns1")]),
        [100, 100],
    ),
    (
        "terminating pods do not count",
        LABELS1,
        {"m1": [{"labels": LABELS1, "deleting": True}], "m2": [{"labels": LABELS1}]},
        objects(services=[service(LABELS1)]),
        [100, 0],
    ),
    (
        "four pods, three service pods",
        LABELS1,
        {"m1": [{"labels": LABELS2}, {"labels": LABELS1}], "m2": [{"labels": LABELS1}, {"labels": LABELS1}]},
        objects(services=[service(LABELS1)]),
        [50, 0],
    ),
    (
        "service with partial pod label matches",
        LABELS1,
        {"m1": [{"labels": LABELS2}, {"labels": LABELS1}], "m2": [{"labels": LABELS1}]},
        objects(services=[service({"baz": "blah"})]),
        [0, 50],
    ),
    (
        "service and replication controller selectors are ANDed",
        LABELS1,
        {"m1": [{"labels": LABELS2}, {"labels": LABELS1}], "m2": [{"labels": LABELS1}]},
        objects(services=[service({"baz": "blah"})], replication_controllers=[owner({"foo": "bar"})]),
        [0, 0],
    ),
    (
        "service and replica set",
        LABELS1,
        {"m1": [{"labels": LABELS2}, {"labels": LABELS1}], "m2": [{"labels": LABELS1}]},
        objects(services=[service({"baz": "blah"})], replica_sets=[owner({"matchLabels": {"foo": "bar"}})]),
        [0, 0],
    ),
    (
        "service and stateful set",
        LABELS1,
        {"m1": [{"labels": LABELS2}, {"labels": LABELS1}], "m2": [{"labels": LABELS1}]},
        objects(services=[service({"baz": "blah"})], stateful_sets=[owner({"matchLabels": {"foo": "bar"}})]),
        [0, 0],
    ),
    (
        "disjoint service and replica set match no pods",
        {"foo": "bar", "bar": "foo"},
        {"m1": [{"labels": LABELS2}, {"labels": LABELS1}], "m2": [{"labels": LABELS1}]},
        objects(services=[service({"bar": "foo"})], replica_sets=[owner({"matchLabels": {"foo": "bar"}})]),
        [100, 100],
    ),
    (
        "another replica set with partial pod label matches",
        LABELS1,
        {"m1": [{"labels": LABELS2}, {"labels": LABELS1}], "m2": [{"labels": LABELS1}]},
        objects(replica_sets=[owner({"matchLabels": {"baz": "blah"}})]),
        [0, 50],
    ),
    (
        "replica set with matchExpressions",
        LABELS1,
        {"m1": [{"labels": LABELS2}, {"labels": LABELS1}], "m2": [{"labels": LABELS1}]},
        objects(replica_sets=[owner({"matchExpressions": [{"key": "foo", "operator": "Exists"}]})]),
        [0, 0],
    ),
    (
        # GetPodReplicaSets fails as a whole on one invalid selector: no replica set selects.
        "an invalid replica set selector drops every replica set",
        LABELS1,
        {"m1": [{"labels": LABELS1}], "m2": []},
        objects(
            replica_sets=[
                owner({"matchLabels": {"foo": "bar"}}),
                owner({"matchExpressions": [{"key": "foo", "operator": "Bogus"}]}),
            ]
        ),
        [100, 100],
    ),
    (
        "a service without a selector selects nothing",
        LABELS1,
        {"m1": [{"labels": LABELS1}], "m2": []},
        objects(services=[service(None)]),
        [100, 100],
    ),
    (
        "an empty replica set selector selects nothing",
        LABELS1,
        {"m1": [{"labels": LABELS1}], "m2": []},
        objects(replica_sets=[owner({})]),
        [100, 100],
    ),
]


@pytest.mark.parametrize(
    ("name", "labels", "placed", "objs", "expected"), TWO_MACHINES, ids=[c[0] for c in TWO_MACHINES]
)
def test_spread_over_nodes(
    name: str, labels: Any, placed: dict[str, list[dict[str, Any]]], objs: ClusterObjects, expected: list[int]
) -> None:
    assert spread(labels, placed, objs) == expected


ZONES = {
    "m1.z1": "zone1",
    "m1.z2": "zone2",
    "m2.z2": "zone2",
    "m1.z3": "zone3",
    "m2.z3": "zone3",
    "m3.z3": "zone3",
}


def in_zones(**pods: list[dict[str, str]]) -> dict[str, list[dict[str, Any]]]:
    return {node: [{"labels": labels} for labels in pods.get(node.replace(".", "_"), [])] for node in ZONES}


ZONED = [
    # 1.20's TestZoneSelectorSpreadPriority; scores in the order of ZONES.
    ("nothing scheduled", in_zones(), [100] * 6),
    ("two pods, 0 matching", in_zones(m1_z1=[LABELS2], m1_z2=[LABELS2]), [100] * 6),
    ("two pods, 1 matching (in z2)", in_zones(m1_z1=[LABELS2], m1_z2=[LABELS1]), [100, 0, 33, 100, 100, 100]),
    (
        "five pods, 3 matching (z2=2, z3=1)",
        in_zones(m1_z1=[LABELS2], m1_z2=[LABELS1], m2_z2=[LABELS1], m1_z3=[LABELS2], m2_z3=[LABELS1]),
        [100, 0, 0, 66, 33, 66],
    ),
    (
        "four pods, 3 matching (z1=1, z2=1, z3=1)",
        in_zones(m1_z1=[LABELS1], m1_z2=[LABELS1], m2_z2=[LABELS2], m1_z3=[LABELS1]),
        [0, 0, 33, 0, 33, 33],
    ),
    (
        "five pods, 4 matching (z1=1, z2=2, z3=1)",
        in_zones(m1_z1=[LABELS1], m1_z2=[LABELS1], m2_z2=[LABELS1, LABELS2], m1_z3=[LABELS1]),
        [33, 0, 0, 33, 66, 66],
    ),
    (
        "two pods on one node (z1=0, z2=1, z3=2)",
        in_zones(m1_z3=[LABELS1, LABELS1], m1_z2=[LABELS1]),
        [100, 50, 66, 0, 33, 33],
    ),
]


@pytest.mark.parametrize(("name", "placed", "expected"), ZONED, ids=[c[0] for c in ZONED])
def test_spread_over_zones(name: str, placed: dict[str, list[dict[str, Any]]], expected: list[int]) -> None:
    assert spread(LABELS1, placed, objects(services=[service(LABELS1)]), zones=ZONES) == expected


def test_nodes_without_zone_only_use_the_node_score() -> None:
    # m1 has no zone: 100 * (2-1)/2 = 50. z-nodes blend: m2 has 2 of the 2 pods in zone a -> node 0, zone 0.
    infos = [
        node_info(model_node("m1"), [model_pod("a", labels=LABELS1)]),
        node_info(
            model_node("m2", labels={ZONE: "a"}),
            [model_pod("b", labels=LABELS1), model_pod("c", labels=LABELS1)],
        ),
        node_info(model_node("m3", labels={ZONE: "a"})),
        node_info(model_node("m4", labels={ZONE: "b"})),
    ]
    pod = model_pod("new", labels=LABELS1)
    snap = snapshot(*infos, objects=objects(services=[service(LABELS1)]))
    # m3: node 100, zone a has 2 of max 2 -> zone 0 -> 100/3 = 33; m4: node 100, zone 100 -> 100.
    assert run_priority(SelectorSpreadPriority(), pod, infos, snap) == [50, 0, 33, 100]


def test_pods_with_topology_spread_constraints_are_left_alone() -> None:
    constraints = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}]
    placed = {"m1": [{"labels": LABELS1}], "m2": []}
    assert spread(
        LABELS1, placed, objects(services=[service(LABELS1)]), topologySpreadConstraints=constraints
    ) == [
        0,
        0,
    ]


def test_default_selector_merges_service_and_controller_selectors() -> None:
    pod = model_pod("p", labels={"app": "web", "tier": "front", "track": "stable"})
    objs = objects(
        services=[service({"app": "web"}), service({"tier": "back"})],
        replication_controllers=[owner({"tier": "front"})],
        stateful_sets=[
            owner({"matchExpressions": [{"key": "track", "operator": "In", "values": ["stable"]}]})
        ],
    )
    selector = default_selector(pod, objs)
    assert sorted((r.key, r.operator) for r in selector.requirements) == [
        ("app", "="),
        ("tier", "="),
        ("track", "In"),
    ]
    assert selector.matches({"app": "web", "tier": "front", "track": "stable", "x": "y"})
    assert not selector.matches({"app": "web", "tier": "front", "track": "canary"})


def test_the_default_selector_remembered_for_a_batch_follows_a_change_of_services() -> None:
    """helper.DefaultSelector is made once per label set for a snapshot chain, and made again when
    the chain's objects change (a volume reservation replaces them halfway through a batch)."""
    pod = model_pod("p", labels={"app": "web", "tier": "front"})
    first = snapshot(objects=objects(services=[service({"app": "web"})]))
    assert snapshot_default_selector(pod, first).matches({"app": "web", "tier": "back"})
    second = dataclasses.replace(first, objects=objects(services=[service({"tier": "front"})]))
    assert second.node_memo is first.node_memo
    assert not snapshot_default_selector(pod, second).matches({"app": "web", "tier": "back"})
    assert snapshot_default_selector(pod, second).matches({"tier": "front"})


def test_zone_key_prefers_the_beta_labels_as_1_20_does() -> None:
    both = model_node(
        "n",
        labels={
            "topology.kubernetes.io/zone": "ga-zone",
            ZONE: "beta-zone",
            "topology.kubernetes.io/region": "ga-region",
        },
    )
    assert both.zone_key == "ga-region:\x00:beta-zone"
    assert model_node("m").zone_key == ""
