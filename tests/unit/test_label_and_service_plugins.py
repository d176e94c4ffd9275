"""CheckNodeLabelPresence and NodeLabel (nodelabel/node_label.go), CheckServiceAffinity and
ServiceAntiAffinity (serviceaffinity/service_affinity.go). Rows marked "1.20 table" are the Go
tests' cases (TestNodeLabelFilter, TestNodeLabelScore, TestServiceAffinity,
TestServiceAffinityScore) with their expected results; the Go tests' pods without a namespace
live in "other" here, since the model gives every pod one."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.model.nodeinfo import ClusterObjects, NodeInfo
from kubesched.model.objects import Pod
from kubesched.plugins.node_label.filtering import ERR_REASON_PRESENCE_VIOLATED, CheckNodeLabelPresence
from kubesched.plugins.node_label.scoring import NodeLabelPriority
from kubesched.plugins.service_affinity.filtering import ERR_REASON_SERVICE_AFFINITY, CheckServiceAffinity
from kubesched.plugins.service_affinity.scoring import ServiceAntiAffinityPriority
from kubesched.policy.compile import compile_policy

from .algofixtures import make_node, make_pod, node_info, run_filter, run_priority, snapshot

NODE_LABELS = {"foo": "any value", "bar": ""}


@pytest.mark.parametrize(
    ("present", "absent", "fits"),
    [
        pytest.param(["baz"], [], False, id="1.20 table: present label does not match"),
        pytest.param([], ["baz"], True, id="1.20 table: absent label does not match"),
        pytest.param(["foo", "baz"], [], False, id="1.20 table: one of two present labels matches"),
        pytest.param([], ["foo", "baz"], False, id="1.20 table: one of two absent labels matches"),
        pytest.param(["foo", "bar"], [], True, id="1.20 table: all present labels match"),
        pytest.param([], ["foo", "bar"], False, id="1.20 table: all absent labels match"),
        pytest.param(["foo"], ["bar"], False, id="1.20 table: both present and absent label matches"),
        pytest.param(["foz"], ["baz"], False, id="1.20 table: neither present nor absent label matches"),
        pytest.param(["foo"], ["baz"], True, id="1.20 table: present matches and absent doesn't match"),
        pytest.param(["foz"], ["bar"], False, id="1.20 table: present doesn't match and absent matches"),
    ],
)
def test_check_node_label_presence(present: list[str], absent: list[str], fits: bool) -> None:
    info = node_info(make_node("n", labels=NODE_LABELS))
    expected = () if fits else (ERR_REASON_PRESENCE_VIOLATED,)
    assert run_filter(CheckNodeLabelPresence(present, absent), make_pod(), info) == expected


@pytest.mark.parametrize(
    ("present", "absent", "expected"),
    [
        pytest.param(["foo"], [], 100, id="1.20 table: one present label match"),
        pytest.param(["somelabel"], [], 0, id="1.20 table: one present label mismatch"),
        pytest.param(["foo", "bar"], [], 100, id="1.20 table: two present labels match"),
        pytest.param(["somelabel1", "somelabel2"], [], 0, id="1.20 table: two present labels mismatch"),
        pytest.param(["foo", "somelabel"], [], 50, id="1.20 table: two present labels only one matches"),
        pytest.param([], ["foo"], 0, id="1.20 table: one absent label match"),
        pytest.param([], ["somelabel"], 100, id="1.20 table: one absent label mismatch"),
        pytest.param(["foo"], ["somelabel"], 100, id="1.20 table: one present match, one absent mismatch"),
        pytest.param(["foo", "bar"], ["somelabel1", "somelabel2"], 100, id="four preferences all met"),
        pytest.param(["foo", "x", "y"], [], 33, id="one of three: 100 / 3 truncated"),
    ],
)
def test_node_label_priority(present: list[str], absent: list[str], expected: int) -> None:
    info = node_info(make_node("n", labels=NODE_LABELS))
    assert run_priority(NodeLabelPriority(present, absent), make_pod(), [info]) == [expected]


def test_label_preferences_of_a_policy_make_one_priority_with_the_summed_weight() -> None:
    """legacy_registry.go: n NodeLabel entries -> one plugin, weight n * w, score averaged."""
    spec = {
        "predicates": [],
        "priorities": [
            {"name": "ssd", "weight": 3, "argument": {"labelPreference": {"label": "ssd", "presence": True}}},
            {
                "name": "old",
                "weight": 3,
                "argument": {"labelPreference": {"label": "old", "presence": False}},
            },
        ],
    }
    algorithm = compile_policy(spec)
    snap = snapshot(
        make_node("ssd-new", labels={"ssd": "1"}),
        make_node("ssd-old", labels={"ssd": "1", "old": "1"}),
        make_node("hdd-old", labels={"old": "1"}),
    )
    assert algorithm.prioritize(make_pod(), snap, snap.nodes) == [600, 300, 0]


REGION_ZONE = {
    "machine1": {"region": "r1", "zone": "z11"},
    "machine2": {"region": "r1", "zone": "z12"},
    "machine3": {"region": "r2", "zone": "z21"},
    "machine4": {"region": "r2", "zone": "z22"},
    "machine5": {"region": "r2", "zone": "z22"},
}
SELECTOR = {"foo": "bar"}


def service(namespace: str, selector: dict[str, str], name: str = "svc") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"selector": selector}}


def cluster(
    labels: dict[str, dict[str, str]], pods: list[tuple[str, Pod]], services: list[dict[str, Any]]
) -> tuple[list[NodeInfo], ClusterObjects]:
    infos = [
        node_info(make_node(name, labels=node_labels), [p for on, p in pods if on == name])
        for name, node_labels in labels.items()
    ]
    objects = ClusterObjects(
        services={f"{s['metadata']['namespace']}/{s['metadata']['name']}": s for s in services}
    )
    return infos, objects


def pod_in(namespace: str, labels: dict[str, str] | None = None, **spec: Any) -> Pod:
    return make_pod("p", namespace, labels=labels, **spec)


@pytest.mark.parametrize(
    ("pod", "pods", "services", "node", "labels", "fits"),
    [
        pytest.param(
            pod_in("default"), [], [], "machine1", ["region"], True, id="1.20 table: nothing scheduled"
        ),
        pytest.param(
            pod_in("default", nodeSelector={"region": "r1"}),
            [],
            [],
            "machine1",
            ["region"],
            True,
            id="1.20 table: pod with region label match",
        ),
        pytest.param(
            pod_in("default", nodeSelector={"region": "r2"}),
            [],
            [],
            "machine1",
            ["region"],
            False,
            id="1.20 table: pod with region label mismatch",
        ),
        pytest.param(
            pod_in("default", SELECTOR),
            [("machine1", pod_in("default", SELECTOR))],
            [service("default", SELECTOR)],
            "machine1",
            ["region"],
            True,
            id="1.20 table: service pod on same node",
        ),
        pytest.param(
            pod_in("default", SELECTOR),
            [("machine2", pod_in("default", SELECTOR))],
            [service("default", SELECTOR)],
            "machine1",
            ["region"],
            True,
            id="1.20 table: service pod on different node, region match",
        ),
        pytest.param(
            pod_in("default", SELECTOR),
            [("machine3", pod_in("default", SELECTOR))],
            [service("default", SELECTOR)],
            "machine1",
            ["region"],
            False,
            id="1.20 table: service pod on different node, region mismatch",
        ),
        pytest.param(
            pod_in("ns1", SELECTOR),
            [("machine3", pod_in("ns1", SELECTOR))],
            [service("ns2", SELECTOR)],
            "machine1",
            ["region"],
            True,
            id="1.20 table: service in different namespace, region mismatch",
        ),
        pytest.param(
            pod_in("ns1", SELECTOR),
            [("machine3", pod_in("ns2", SELECTOR))],
            [service("ns1", SELECTOR)],
            "machine1",
            ["region"],
            True,
            id="1.20 table: pod in different namespace, region mismatch",
        ),
        pytest.param(
            pod_in("ns1", SELECTOR),
            [("machine3", pod_in("ns1", SELECTOR))],
            [service("ns1", SELECTOR)],
            "machine1",
            ["region"],
            False,
            id="1.20 table: service and pod in same namespace, region mismatch",
        ),
        pytest.param(
            pod_in("default", SELECTOR),
            [("machine2", pod_in("default", SELECTOR))],
            [service("default", SELECTOR)],
            "machine1",
            ["region", "zone"],
            False,
            id="1.20 table: multiple labels, not all match",
        ),
        pytest.param(
            pod_in("default", SELECTOR),
            [("machine5", pod_in("default", SELECTOR))],
            [service("default", SELECTOR)],
            "machine4",
            ["region", "zone"],
            True,
            id="1.20 table: multiple labels, all match",
        ),
    ],
)
def test_check_service_affinity(
    pod: Pod,
    pods: list[tuple[str, Pod]],
    services: list[dict[str, Any]],
    node: str,
    labels: list[str],
    fits: bool,
) -> None:
    infos, objects = cluster(REGION_ZONE, pods, services)
    snap = snapshot(*infos, objects=objects)
    info = snap.get(node)
    assert info is not None
    expected = () if fits else (ERR_REASON_SERVICE_AFFINITY,)
    assert run_filter(CheckServiceAffinity(labels), pod, info, snap) == expected


L1 = {"foo": "bar", "baz": "blah"}
L2 = {"bar": "foo", "baz": "blah"}
LABELED = {
    "machine01": {"name": "value"},
    "machine02": {"name": "value"},
    "machine11": {"zone": "zone1"},
    "machine12": {"zone": "zone1"},
    "machine21": {"zone": "zone2"},
    "machine22": {"zone": "zone2"},
}
RACKS = {
    "machine01": {"name": "value"},
    "machine02": {"name": "value"},
    "machine11": {"zone": "zone1", "rack": "rack1"},
    "machine12": {"zone": "zone1", "rack": "rack2"},
    "machine21": {"zone": "zone2", "rack": "rack1"},
    "machine22": {"zone": "zone2", "rack": "rack1"},
}


def on(node: str, labels: dict[str, str] | None = None, namespace: str = "other") -> tuple[str, Pod]:
    return node, make_pod("e", namespace, labels=labels)


@pytest.mark.parametrize(
    ("pods", "nodes", "services", "labels", "expected"),
    [
        pytest.param(
            [], LABELED, [], ["zone"], [0, 0, 100, 100, 100, 100], id="1.20 table: nothing scheduled"
        ),
        pytest.param(
            [on("machine11")], LABELED, [], ["zone"], [0, 0, 100, 100, 100, 100], id="1.20 table: no services"
        ),
        pytest.param(
            [on("machine11", L2)],
            LABELED,
            [service("other", {"key": "value"})],
            ["zone"],
            [0, 0, 100, 100, 100, 100],
            id="1.20 table: different services",
        ),
        pytest.param(
            [on("machine01", L2), on("machine11", L2), on("machine21", L1)],
            LABELED,
            [service("other", L1)],
            ["zone"],
            [0, 0, 100, 100, 0, 0],
            id="1.20 table: three pods, one service pod",
        ),
        pytest.param(
            [on("machine11", L2), on("machine11", L1), on("machine21", L1)],
            LABELED,
            [service("other", L1)],
            ["zone"],
            [0, 0, 50, 50, 50, 50],
            id="1.20 table: three pods, two service pods on different machines",
        ),
        pytest.param(
            [
                on("machine11", L1),
                on("machine11", L1, "default"),
                on("machine21", L1),
                on("machine21", L1, "ns1"),
            ],
            LABELED,
            [service("default", L1)],
            ["zone"],
            [0, 0, 0, 0, 100, 100],
            id="1.20 table: three service label match pods in different namespaces",
        ),
        pytest.param(
            [on("machine11", L2), on("machine11", L1), on("machine21", L1), on("machine21", L1)],
            LABELED,
            [service("other", L1)],
            ["zone"],
            [0, 0, 66, 66, 33, 33],
            id="1.20 table: four pods, three service pods",
        ),
        pytest.param(
            [on("machine11", L2), on("machine11", L1), on("machine21", L1)],
            LABELED,
            [service("other", {"baz": "blah"})],
            ["zone"],
            [0, 0, 33, 33, 66, 66],
            id="1.20 table: service with partial pod label matches",
        ),
        pytest.param(
            [on("machine01", L1), on("machine11", L1), on("machine21", L1), on("machine21", L1)],
            LABELED,
            [service("other", L1)],
            ["zone"],
            [0, 0, 75, 75, 50, 50],
            id="1.20 table: service pod on non-zoned node",
        ),
        pytest.param(
            [on("machine01", L2), on("machine11", L1), on("machine21", L1)],
            RACKS,
            [service("other", L1)],
            ["zone", "rack"],
            [0, 0, 25, 75, 25, 25],
            id="1.20 table: three pods, two service pods, with rack label",
        ),
    ],
)
def test_service_anti_affinity(
    pods: list[tuple[str, Pod]],
    nodes: dict[str, dict[str, str]],
    services: list[dict[str, Any]],
    labels: list[str],
    expected: list[int],
) -> None:
    infos, objects = cluster(nodes, pods, services)
    snap = snapshot(*infos, objects=objects)
    # The Go case "in different namespaces" schedules its pod in "default", the others in "".
    namespace = services[0]["metadata"]["namespace"] if services else "other"
    pod = make_pod("p", namespace, labels=L1)
    assert run_priority(ServiceAntiAffinityPriority(labels), pod, infos, snap) == expected
