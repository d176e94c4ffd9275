"""CheckServiceAffinity and ServiceAntiAffinity (serviceaffinity/service_affinity.go). Rows marked
"1.20 table" are the Go tests' cases (TestServiceAffinity, TestServiceAffinityScore) with their
expected results; the Go tests' pods without a namespace live in "other" here, since the model
gives every pod one."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.model.nodeinfo import ClusterObjects, NodeInfo
from kubesched.model.objects import Pod
from kubesched.plugins.service_affinity.filtering import ERR_REASON_SERVICE_AFFINITY, CheckServiceAffinity
from kubesched.plugins.service_affinity.scoring import ServiceAntiAffinityPriority
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter, run_priority, snapshot

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
        node_info(model_node(name, labels=node_labels), [p for on, p in pods if on == name])
        for name, node_labels in labels.items()
    ]
    objects = ClusterObjects(
        services={f"{s['metadata']['namespace']}/{s['metadata']['name']}": s for s in services}
    )
    return infos, objects


def pod_in(namespace: str, labels: dict[str, str] | None = None, **spec: Any) -> Pod:
    return model_pod("p", namespace, labels=labels, **spec)


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
    return node, model_pod("e", namespace, labels=labels)


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
    pod = model_pod("p", namespace, labels=L1)
    assert run_priority(ServiceAntiAffinityPriority(labels), pod, infos, snap) == expected
