"""EvenPodsSpread and EvenPodsSpreadPriority / SelectorSpreadPriority as PodTopologySpread
(podtopologyspread/filtering.go, scoring.go, common.go). Rows marked "1.20 table" are cases of
TestSingleConstraint, TestMultipleConstraints and TestPodTopologySpreadScore with their expected
results."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.model.nodeinfo import ClusterObjects, Snapshot
from kubesched.model.objects import Pod
from kubesched.plugins.pod_topology_spread.filtering import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    EvenPodsSpread,
)
from kubesched.plugins.pod_topology_spread.scoring import PodTopologySpreadPriority
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter, run_priority, snapshot

HOST = "kubernetes.io/hostname"
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}


def spread(max_skew: int, key: str, when: str = "DoNotSchedule", selector: Any = FOO) -> dict[str, Any]:
    return {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": selector}


def incoming(*constraints: dict[str, Any], labels: tuple[str, ...] = ("foo",), **spec: Any) -> Pod:
    return model_pod(
        "p", labels=dict.fromkeys(labels, ""), topologySpreadConstraints=list(constraints), **spec
    )


def cluster(
    nodes: dict[str, dict[str, str]], pods: list[tuple[str, tuple[str, ...]]], **kwargs: Any
) -> Snapshot:
    """Nodes by name with their labels; pods as (node, label keys), "!" first meaning terminating,
    "ns1:" a pod of namespace ns1."""
    infos = []
    for name, labels in nodes.items():
        placed = []
        for on, keys in pods:
            if on != name:
                continue
            namespace = "ns1" if "ns1:" in keys else "default"
            plain = [k for k in keys if k not in ("!", "ns1:")]
            placed.append(model_pod("e", namespace, labels=dict.fromkeys(plain, ""), deleting="!" in keys))
        infos.append(node_info(model_node(name, labels=labels), placed))
    return snapshot(*infos, **kwargs)


HOSTS = {name: {HOST: name} for name in ("node-a", "node-b", "node-c", "node-d")}
ZONED_HOSTS = {
    n: {"zone": z, HOST: n}
    for n, z in (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))
}


def on(node: str, count: int, *labels: str) -> list[tuple[str, tuple[str, ...]]]:
    """`count` pods with `labels` on `node`."""
    return [(node, labels or ("foo",))] * count


ZONES = {
    "node-a": {"zone": "zone1", "node": "node-a"},
    "node-b": {"zone": "zone1", "node": "node-b"},
    "node-x": {"zone": "zone2", "node": "node-x"},
    "node-y": {"zone": "zone2", "node": "node-y"},
}
SPREAD_2_1_0_3 = [("node-a", ("foo",)), ("node-a", ("foo",)), ("node-b", ("foo",))] + [
    ("node-y", ("foo",))
] * 3
OK = ()
SKEW = (ERR_REASON_CONSTRAINTS_NOT_MATCH,)
NO_LABEL = (ERR_REASON_NODE_LABEL_NOT_MATCH,)


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "expected"),
    [
        pytest.param(
            incoming(spread(1, "zone")), ZONES, [], [OK, OK, OK, OK], id="1.20 table: no existing pods"
        ),
        pytest.param(
            incoming(spread(1, "zone", selector=BAR)),
            ZONES,
            [],
            [OK, OK, OK, OK],
            id="1.20 table: no existing pods, incoming pod doesn't match itself",
        ),
        pytest.param(
            incoming(spread(1, "zone")),
            ZONES,
            [
                ("node-a", ("foo", "ns1:")),
                ("node-a", ("foo", "ns1:")),
                ("node-x", ("foo",)),
                ("node-y", ("foo",)),
            ],
            [OK, OK, SKEW, SKEW],
            id="1.20 table: existing pods in a different namespace do not count",
        ),
        pytest.param(
            incoming(spread(1, "zone")),
            ZONES,
            on("node-a", 2) + on("node-b", 1) + on("node-y", 3),
            [OK, OK, OK, OK],
            id="1.20 table: pods spread across zones as 3/3, all nodes fit",
        ),
        pytest.param(
            incoming(spread(1, "zone")),
            {**ZONES, "node-b": {"zon": "zone1", "node": "node-b"}},
            [("node-a", ("foo",)), ("node-b", ("foo",)), ("node-x", ("foo",)), ("node-y", ("foo",))],
            [OK, NO_LABEL, SKEW, SKEW],
            id="1.20 table: spread 1/2 due to absence of label 'zone' on node-b",
        ),
        pytest.param(
            incoming(spread(1, "rack")),
            {k: ZONES[k] for k in ("node-a", "node-x")},
            [],
            [NO_LABEL, NO_LABEL],
            id="1.20 table: all nodes don't have label 'rack'",
        ),
        pytest.param(
            incoming(spread(1, "node")),
            ZONES,
            SPREAD_2_1_0_3,
            [SKEW, SKEW, OK, SKEW],
            id="1.20 table: pods spread across nodes as 2/1/0/3, only node-x fits",
        ),
        pytest.param(
            incoming(spread(2, "node")),
            ZONES,
            SPREAD_2_1_0_3,
            [SKEW, OK, OK, SKEW],
            id="1.20 table: 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        ),
        pytest.param(
            incoming(spread(1, "node"), labels=("bar",)),
            ZONES,
            SPREAD_2_1_0_3,
            [SKEW, OK, OK, SKEW],
            id="1.20 table: 2/1/0/3, but pod doesn't match itself",
        ),
        pytest.param(
            incoming(
                spread(1, "node"),
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "node", "operator": "In", "values": ["node-a", "node-y"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
            ),
            ZONES,
            SPREAD_2_1_0_3,
            [OK, OK, OK, SKEW],
            id="1.20 table: incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        ),
        pytest.param(
            incoming(spread(1, "node")),
            {"node-a": {"node": "node-a"}, "node-b": {"node": "node-b"}},
            [("node-a", ("!", "foo")), ("node-b", ("foo",))],
            [OK, SKEW],
            id="1.20 table: terminating Pods should be excluded",
        ),
        pytest.param(
            incoming(spread(1, "zone"), spread(1, "node")),
            ZONES,
            [("node-a", ("foo",)), ("node-x", ("foo",)), ("node-x", ("foo",)), ("node-y", ("foo",))],
            [SKEW, OK, SKEW, SKEW],
            id="1.20 table (TestMultipleConstraints): zone 1/3 and node 1/0/2/1, only node-b fits",
        ),
    ],
)
def test_even_pods_spread(
    pod: Pod, nodes: dict[str, dict[str, str]], pods: list[Any], expected: list[tuple[str, ...]]
) -> None:
    snap = cluster(nodes, pods)
    assert [run_filter(EvenPodsSpread(), pod, info, snap) for info in snap.nodes] == expected


def test_schedule_anyway_constraints_do_not_filter() -> None:
    snap = cluster(ZONES, SPREAD_2_1_0_3)
    pod = incoming(spread(1, "node", "ScheduleAnyway"))
    assert [run_filter(EvenPodsSpread(), pod, info, snap) for info in snap.nodes] == [OK] * 4


def anyway(max_skew: int, key: str, selector: Any = FOO) -> dict[str, Any]:
    return spread(max_skew, key, "ScheduleAnyway", selector)


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "feasible", "expected"),
    [
        pytest.param(
            incoming(anyway(1, HOST)), {k: HOSTS[k] for k in ("node-a", "node-b")}, [], ["node-a", "node-b"],
            [100, 100], id="1.20 table: one constraint on node, no existing pods",
        ),
        pytest.param(
            incoming(anyway(1, HOST)), {k: HOSTS[k] for k in ("node-a", "node-b")},
            [("node-a", ("foo",)), ("node-a", ("foo",)), ("node-b", ("foo",))], ["node-a"], [100],
            id="1.20 table: one constraint on node, only one node is candidate",
        ),
        pytest.param(
            incoming(anyway(1, HOST)), HOSTS,
            on("node-a", 2) + on("node-b", 1) + on("node-d", 3), list(HOSTS),
            [40, 80, 100, 0], id="1.20 table: one constraint on node, all 4 nodes are candidates",
        ),
        pytest.param(
            incoming(anyway(2, HOST)), HOSTS,
            on("node-a", 2) + on("node-b", 1) + on("node-d", 3), list(HOSTS),
            [50, 83, 100, 16], id="1.20 table: all 4 nodes are candidates, maxSkew=2",
        ),
        pytest.param(
            incoming(anyway(3, HOST)), HOSTS,
            on("node-a", 4) + on("node-b", 3) + on("node-c", 2) + on("node-d", 1),
            list(HOSTS), [33, 55, 77, 100], id="1.20 table: all 4 nodes are candidates, maxSkew=3",
        ),
        pytest.param(
            incoming(anyway(1, "zone")),
            ZONED_HOSTS,
            on("node-a", 4) + on("node-b", 2) + on("node-x", 1) + on("node-y", 3),
            ["node-a", "node-b", "node-x"], [62, 62, 100],
            id="1.20 table: one constraint on zone, 3 out of 4 nodes are candidates",
        ),
        pytest.param(
            incoming(anyway(1, "zone"), anyway(1, HOST)),
            ZONED_HOSTS,
            on("node-a", 2) + on("node-b", 1) + on("node-x", 2) + on("node-y", 4),
            ["node-a", "node-x"], [100, 54],
            id="1.20 table: two constraints on zone and node, 2 out of 4 nodes are candidates",
        ),
        pytest.param(
            incoming(anyway(1, "zone"), anyway(1, HOST, BAR), labels=("foo", "bar")),
            ZONED_HOSTS,
            [("node-a", ("foo",)), ("node-b", ("foo", "bar")), ("node-y", ("foo",)), ("node-y", ("bar",))],
            ["node-a", "node-b", "node-x", "node-y"], [75, 25, 100, 50],
            id="1.20 table: two constraints on zone and node, with different labelSelectors",
        ),
        pytest.param(
            incoming(anyway(1, HOST)), {k: HOSTS[k] for k in ("node-a", "node-b")},
            [("node-a", ("foo", "ns1:")), ("node-a", ("foo",)), ("node-b", ("foo",)), ("node-b", ("foo",))],
            ["node-a", "node-b"],
            [100, 50],
            id="1.20 table: existing pods in a different namespace do not count",
        ),
        pytest.param(
            incoming(anyway(1, HOST)), {"node-a": HOSTS["node-a"], "node-b": {"n": "node-b"}},
            [], ["node-a", "node-b"], [100, 0], id="a node missing the key scores 0",
        ),
        pytest.param(
            incoming(), {k: HOSTS[k] for k in ("node-a", "node-b")}, on("node-a", 1), ["node-a", "node-b"],
            [100, 100], id="no constraints at all: every node 100 (normalised zeros)",
        ),
    ],
)  # fmt: skip
def test_pod_topology_spread_score(
    pod: Pod, nodes: dict[str, dict[str, str]], pods: list[Any], feasible: list[str], expected: list[int]
) -> None:
    snap = cluster(nodes, pods)
    infos = [info for name in feasible if (info := snap.get(name)) is not None]
    assert run_priority(PodTopologySpreadPriority(), pod, infos, snap) == expected


def test_system_default_constraints_spread_a_services_pods() -> None:
    """SelectorSpreadPriority with DefaultPodTopologySpread on: system defaults (hostname maxSkew 3,
    zone maxSkew 5) with the Service's selector, for a pod without constraints of its own."""
    service = {"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": {"app": "web"}}}
    objects = ClusterObjects(services={"default/web": service})
    zoned = {
        "n1": {HOST: "n1", "topology.kubernetes.io/zone": "a"},
        "n2": {HOST: "n2", "topology.kubernetes.io/zone": "a"},
        "n3": {HOST: "n3", "topology.kubernetes.io/zone": "b"},
    }
    infos = [
        node_info(
            model_node(name, labels=labels),
            [model_pod(f"w{i}", labels={"app": "web"}) for i in range(2 if name == "n1" else 0)],
        )
        for name, labels in zoned.items()
    ]
    snap = snapshot(*infos, objects=objects)
    pod = model_pod("web-new", labels={"app": "web"})
    # hostname: n1 2 pods, weight log(3+2); zone a 2 pods, b 0, weight log(2+2); +2 and +4 for maxSkew-1.
    # raw: n1 = 2*1.609+2 + 2*1.386+4 = 11.99 -> 11; n2 = 2 + 6.77 = 8; n3 = 2 + 4 = 6
    # normalised: 100*(11+6-s)/11 -> n1 54, n2 81, n3 100
    assert run_priority(PodTopologySpreadPriority(system_defaults=True), pod, infos, snap) == [54, 81, 100]
    # Without the system defaults (EvenPodsSpreadPriority alone) nothing spreads this pod.
    assert run_priority(PodTopologySpreadPriority(), pod, infos, snap) == [100, 100, 100]
    # A pod nothing selects gets no default constraints either.
    assert (
        run_priority(PodTopologySpreadPriority(system_defaults=True), model_pod("x"), infos, snap)
        == [100] * 3
    )
