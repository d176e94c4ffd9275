"""CheckVolumeBinding (volumebinding/volume_binding.go and the volume binder's FindPodVolumes in
controller/volume/scheduling/scheduler_binder.go, FindMatchingVolume in
persistentvolume/util/util.go): the cases of volume_binding_test.go and scheduler_binder_test.go
restated on kubesched's objects; storage capacity from 1.32's volumebinding/binder_test.go."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kubesched.algorithm.volume_reserve import VolumeBindingError, assume_pod_volumes
from kubesched.model.nodeinfo import ClusterObjects
from kubesched.model.objects import Pod
from kubesched.plugins.framework import SKIP, Reject
from kubesched.plugins.volume_binding.filtering import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    ERR_REASON_UNBOUND_IMMEDIATE,
    CheckVolumeBinding,
)
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter, snapshot

ZONE = "topology.kubernetes.io/zone"


def storage_class(
    name: str, mode: str | None, provisioner: str = "example.com/p", **extra: Any
) -> dict[str, Any]:
    sc: dict[str, Any] = {"metadata": {"name": name}, "provisioner": provisioner, **extra}
    if mode is not None:
        sc["volumeBindingMode"] = mode
    return sc


def pvc(
    name: str,
    storage_class: str = "wait",
    volume: str = "",
    bound: bool = False,
    size: str = "1Gi",
    **meta: Any,
) -> dict[str, Any]:
    annotations = dict(meta.pop("annotations", {}))
    if bound:
        annotations["pv.kubernetes.io/bind-completed"] = "yes"
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "annotations": annotations,
            **meta,
        },
        "spec": {
            "storageClassName": storage_class,
            "volumeName": volume,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
        },
    }


def zone_affinity(*zones: str) -> dict[str, Any]:
    return {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": ZONE, "operator": "In", "values": list(zones)}]}
            ]
        }
    }


def pv(
    name: str,
    storage_class: str = "wait",
    size: str = "1Gi",
    zones: tuple[str, ...] = (),
    phase: str = "Available",
    claim: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "storageClassName": storage_class,
        "capacity": {"storage": size},
        "accessModes": ["ReadWriteOnce"],
    }
    if zones:
        spec["nodeAffinity"] = zone_affinity(*zones)
    if claim is not None:
        spec["claimRef"] = {"name": claim, "namespace": "default"}
    return {"metadata": {"name": name}, "spec": spec, "status": {"phase": phase}}


def objects(claims: list[dict[str, Any]], volumes: list[dict[str, Any]]) -> ClusterObjects:
    classes = [
        storage_class("wait", "WaitForFirstConsumer"),
        storage_class("immediate", "Immediate"),
        storage_class("no-mode", None),
        storage_class("static", "WaitForFirstConsumer", "kubernetes.io/no-provisioner"),
        storage_class(
            "zone-a-only",
            "WaitForFirstConsumer",
            allowedTopologies=[{"matchLabelExpressions": [{"key": ZONE, "values": ["a"]}]}],
        ),
    ]
    return ClusterObjects(
        persistent_volume_claims={f"default/{c['metadata']['name']}": c for c in claims},
        persistent_volumes={v["metadata"]["name"]: v for v in volumes},
        storage_classes={c["metadata"]["name"]: c for c in classes},
    )


def uses(*claims: str) -> Pod:
    return model_pod("p", volumes=[{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims])


NODE_A = model_node("node-a", labels={ZONE: "a"})
NODE_B = model_node("node-b", labels={ZONE: "b"})


def verdicts(pod: Pod, objs: ClusterObjects) -> list[tuple[str, ...]]:
    snap = snapshot(node_info(NODE_A), node_info(NODE_B), objects=objs)
    return [run_filter(CheckVolumeBinding(), pod, info, snap) for info in snap.nodes]


OK: tuple[str, ...] = ()


@pytest.mark.parametrize(
    ("claims", "volumes", "expected"),
    [
        pytest.param(
            [pvc("c", volume="pv", bound=True)],
            [pv("pv", zones=("a",))],
            [OK, (ERR_REASON_NODE_CONFLICT,)],
            id="a bound claim follows its PV's node affinity",
        ),
        pytest.param(
            [pvc("c", volume="pv", bound=True)], [pv("pv")], [OK, OK], id="a bound PV without node affinity"
        ),
        pytest.param(
            [pvc("c", volume="gone", bound=True)],
            [],
            [(ERR_REASON_PV_NOT_EXIST,)] * 2,
            id="a claim bound to a PV that does not exist",
        ),
        pytest.param(
            [pvc("c", "static")],
            [pv("pv", "static", zones=("b",))],
            [(ERR_REASON_BIND_CONFLICT,), OK],
            id="an unbound WaitForFirstConsumer claim needs an available PV on the node",
        ),
        pytest.param(
            [pvc("c", "static", size="5Gi")],
            [pv("pv", "static", size="1Gi")],
            [(ERR_REASON_BIND_CONFLICT,)] * 2,
            id="a PV smaller than the claim does not match",
        ),
        pytest.param(
            [pvc("c", "static")],
            [pv("pv", "static", phase="Bound")],
            [(ERR_REASON_BIND_CONFLICT,)] * 2,
            id="a PV that is not Available does not match",
        ),
        pytest.param(
            [pvc("c", "static")],
            [pv("pv", "static", claim="someone-else")],
            [(ERR_REASON_BIND_CONFLICT,)] * 2,
            id="a PV claimed by another claim does not match",
        ),
        pytest.param(
            [pvc("c", "static")],
            [pv("pv", "static", phase="Bound", claim="c", zones=("a",))],
            [OK, (ERR_REASON_BIND_CONFLICT,)],
            id="a PV pre-bound to the claim matches whatever its phase",
        ),
        pytest.param(
            [pvc("c1", "static"), pvc("c2", "static")],
            [pv("pv", "static")],
            [(ERR_REASON_BIND_CONFLICT,)] * 2,
            id="one PV binds one claim only",
        ),
        pytest.param([pvc("c")], [], [OK, OK], id="no PV: the class provisions on any node"),
        pytest.param(
            [pvc("c", "zone-a-only")],
            [],
            [OK, (ERR_REASON_BIND_CONFLICT,)],
            id="provisioning honours the class's allowedTopologies",
        ),
        pytest.param(
            [pvc("c", annotations={"volume.kubernetes.io/selected-node": "node-b"})],
            [],
            [(ERR_REASON_BIND_CONFLICT,), OK],
            id="a claim being provisioned for a node fits that node only",
        ),
        pytest.param(
            [pvc("c", volume="pv", bound=True), pvc("d", "static")],
            [pv("pv", zones=("a",)), pv("q", "static", zones=("a",))],
            [OK, (ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT)],
            id="bound and unbound conflicts are both reported, in 1.20's order",
        ),
    ],
)
def test_check_volume_binding(
    claims: list[dict[str, Any]], volumes: list[dict[str, Any]], expected: list[tuple[str, ...]]
) -> None:
    names = [c["metadata"]["name"] for c in claims]
    assert verdicts(uses(*names), objects(claims, volumes)) == expected


@pytest.mark.parametrize(
    ("claim", "reasons"),
    [
        (pvc("c", "immediate"), (ERR_REASON_UNBOUND_IMMEDIATE,)),
        (pvc("c", "wait", volume="pv"), (ERR_REASON_UNBOUND_IMMEDIATE,)),  # pre-bound, not bound yet
        (pvc("c", "no-mode"), ('VolumeBindingMode not set for StorageClass "no-mode"',)),
        (
            pvc("c", "wait", deletionTimestamp="2021-01-01T00:00:00Z"),
            ('persistentvolumeclaim "c" is being deleted',),
        ),
        (pvc("c", "missing-class"), (ERR_REASON_UNBOUND_IMMEDIATE,)),  # an unknown class binds immediately
    ],
)
def test_claims_that_make_the_pod_unschedulable_everywhere(
    claim: dict[str, Any], reasons: tuple[str, ...]
) -> None:
    """VolumeBinding PreFilter: UnschedulableAndUnresolvable for every node."""
    snap = snapshot(NODE_A, objects=objects([claim], []))
    assert CheckVolumeBinding().prefilter(uses("c"), snap) == Reject(reasons)


def test_a_missing_claim_and_pods_without_claims() -> None:
    snap = snapshot(NODE_A, objects=objects([], []))
    assert CheckVolumeBinding().prefilter(uses("nope"), snap) == Reject(
        ('persistentvolumeclaim "nope" not found',)
    )
    assert CheckVolumeBinding().prefilter(model_pod(), snap) is SKIP


# ---------------------------------------------------------------------------- storage capacity
# kube-scheduler 1.32 pkg/scheduler/framework/plugins/volumebinding/binder_test.go: newTestBinder's
# classes, makeCSIDriver, makeCapacity and TestCapacity's scenarios.

PROVISIONER = "test-provisioner"
NODE_LABEL_KEY = "nodeKey"
NODE1 = model_node("node1", labels={NODE_LABEL_KEY: "node1"})
NODE2 = model_node("node2", labels={NODE_LABEL_KEY: "node2"})


def csi_driver(name: str, storage_capacity: bool | None) -> dict[str, Any]:
    """makeCSIDriver; None leaves spec.storageCapacity out, as a 1.20 API server stores it."""
    spec = {} if storage_capacity is None else {"storageCapacity": storage_capacity}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name}, "spec": spec}


def capacity(
    name: str,
    storage_class: str,
    node: str | None,
    size: str = "",
    maximum_volume_size: str = "",
    namespace: str = "kube-system",
    **fields: Any,
) -> dict[str, Any]:
    """makeCapacity: node None is network-attached storage (an empty nodeTopology, every node)."""
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": namespace},
        "storageClassName": storage_class,
        "nodeTopology": {} if node is None else {"matchLabels": {NODE_LABEL_KEY: node}},
    }
    if size:
        obj["capacity"] = size
    if maximum_volume_size:
        obj["maximumVolumeSize"] = maximum_volume_size
    return {**obj, **fields}


def capacity_objects(
    claims: list[dict[str, Any]], capacities: list[dict[str, Any]], drivers: list[dict[str, Any]]
) -> ClusterObjects:
    wait = "WaitForFirstConsumer"
    topology = [{"matchLabelExpressions": [{"key": NODE_LABEL_KEY, "values": ["node1", "reference-value"]}]}]
    classes = [
        storage_class("waitClassWithProvisioner", wait, PROVISIONER, allowedTopologies=topology),
        storage_class("waitClass", wait, "kubernetes.io/no-provisioner"),
        storage_class("anywhere", wait, PROVISIONER),  # kubesched's: no allowedTopologies
    ]
    return ClusterObjects(
        persistent_volume_claims={f"default/{c['metadata']['name']}": c for c in claims},
        storage_classes={c["metadata"]["name"]: c for c in classes},
        csi_drivers={d["metadata"]["name"]: d for d in drivers},
        csi_storage_capacities={
            f"{c['metadata']['namespace']}/{c['metadata']['name']}": c for c in capacities
        },
    )


PROVISIONED_PVC = pvc("provisioned-pvc", "waitClassWithProvisioner", size="1Gi")
NOT_ENOUGH_SPACE = (ERR_REASON_NOT_ENOUGH_SPACE,)
CLASS = "waitClassWithProvisioner"

# TestCapacity: (name, capacities, reasons on node1 when the driver opts in).
TEST_CAPACITY = [
    ("network-attached", [capacity("net", CLASS, None, "1Gi")], OK),
    ("local-storage", [capacity("net", CLASS, "node1", "1Gi")], OK),
    (
        "multiple",
        [
            capacity("net", CLASS, None, "1Gi"),
            capacity("node2", CLASS, "node2", "1Gi"),
            capacity("node1", CLASS, "node1", "1Gi"),
        ],
        OK,
    ),
    ("no-storage", [], NOT_ENOUGH_SPACE),
    ("wrong-node", [capacity("net", CLASS, "node2", "1Gi")], NOT_ENOUGH_SPACE),
    ("wrong-storage-class", [capacity("net", "waitClass", "node1", "1Gi")], NOT_ENOUGH_SPACE),
    ("insufficient-storage", [capacity("net", CLASS, "node1", "1Mi")], NOT_ENOUGH_SPACE),
    ("insufficient-volume-size", [capacity("net", CLASS, "node1", "1Gi", "1Mi")], NOT_ENOUGH_SPACE),
    ("zero-storage", [capacity("net", CLASS, "node1", "0Mi")], NOT_ENOUGH_SPACE),
    ("zero-volume-size", [capacity("net", CLASS, "node1", "", "0Mi")], NOT_ENOUGH_SPACE),
    ("nil-storage", [capacity("net", CLASS, "node1")], NOT_ENOUGH_SPACE),
]


def on_node1(claims: list[dict[str, Any]], objs: ClusterObjects) -> tuple[str, ...]:
    pod = uses(*(c["metadata"]["name"] for c in claims))
    return run_filter(CheckVolumeBinding(), pod, node_info(NODE1), snapshot(NODE1, NODE2, objects=objs))


@pytest.mark.parametrize(
    "opt_in", [True, False], ids=["CSIDriver.StorageCapacity=true", "CSIDriver.StorageCapacity=false"]
)
@pytest.mark.parametrize(
    ("capacities", "reasons"), [case[1:] for case in TEST_CAPACITY], ids=[case[0] for case in TEST_CAPACITY]
)
def test_capacity(opt_in: bool, capacities: list[dict[str, Any]], reasons: tuple[str, ...]) -> None:
    """TestCapacity: a driver that does not opt in is never checked; one that does needs a
    CSIStorageCapacity of the class that reaches node1 and offers 1Gi (maximumVolumeSize first)."""
    objs = capacity_objects([PROVISIONED_PVC], capacities, [csi_driver(PROVISIONER, opt_in)])
    assert on_node1([PROVISIONED_PVC], objs) == (reasons if opt_in else OK)


@pytest.mark.parametrize(
    ("drivers", "claim"),
    [
        pytest.param([], PROVISIONED_PVC, id="no CSIDriver named by the provisioner"),
        pytest.param([csi_driver(PROVISIONER, None)], PROVISIONED_PVC, id="storageCapacity absent (1.20)"),
        pytest.param([csi_driver("other", True)], PROVISIONED_PVC, id="another driver opts in"),
        pytest.param(
            [csi_driver(PROVISIONER, True)],
            {**PROVISIONED_PVC, "spec": {**PROVISIONED_PVC["spec"], "resources": {}}},
            id="a claim without a storage request",
        ),
    ],
)
def test_capacity_is_not_checked(drivers: list[dict[str, Any]], claim: dict[str, Any]) -> None:
    """hasEnoughCapacity answers "enough" before looking at any CSIStorageCapacity."""
    assert on_node1([claim], capacity_objects([claim], [], drivers)) == OK


def test_a_capacity_in_any_namespace_counts() -> None:
    objs = capacity_objects(
        [PROVISIONED_PVC],
        [capacity("c", CLASS, "node1", "10Gi", namespace="driver-ns")],
        [csi_driver(PROVISIONER, True)],
    )
    assert on_node1([PROVISIONED_PVC], objs) == OK


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(capacity("c", CLASS, "node1", "lots"), id="a malformed capacity offers nothing"),
        pytest.param(
            capacity("c", CLASS, "node1", "1Ti", "big"), id="a malformed maximumVolumeSize offers nothing"
        ),
        pytest.param(
            capacity("c", CLASS, "node1", "1Ti", nodeTopology=None), id="a nil nodeTopology reaches no node"
        ),
        pytest.param(
            capacity(
                "c",
                CLASS,
                None,
                "1Ti",
                nodeTopology={"matchExpressions": [{"key": NODE_LABEL_KEY, "operator": "Near"}]},
            ),
            id="a nodeTopology that does not parse reaches no node",
        ),
    ],
)
def test_a_malformed_capacity_is_no_capacity(bad: dict[str, Any]) -> None:
    """From a hand-written snapshot (the API server validates both fields): no crash, no room."""
    objs = capacity_objects([PROVISIONED_PVC], [bad], [csi_driver(PROVISIONER, True)])
    assert on_node1([PROVISIONED_PVC], objs) == NOT_ENOUGH_SPACE


def test_the_capacity_check_follows_the_provisioner_and_topology_checks() -> None:
    """checkVolumeProvisions: node2 fails allowedTopologies first (a bind conflict, no storage
    reason); on node1 the missing capacity is the only reason, with the bound claim's conflict
    before it in FindPodVolumes' order."""
    bound = pvc("bound", volume="pv", bound=True)
    objs = capacity_objects([PROVISIONED_PVC, bound], [], [csi_driver(PROVISIONER, True)])
    objs = replace(objs, persistent_volumes={"pv": pv("pv", zones=("a",))})
    snap = snapshot(NODE1, NODE2, objects=objs)
    pod = uses("provisioned-pvc", "bound")
    assert [run_filter(CheckVolumeBinding(), pod, info, snap) for info in snap.nodes] == [
        (ERR_REASON_NODE_CONFLICT, ERR_REASON_NOT_ENOUGH_SPACE),
        (ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT),
    ]


@pytest.mark.parametrize(
    ("selected_node", "expected"),
    [
        pytest.param(None, [NOT_ENOUGH_SPACE, OK], id="provisioned where a large enough capacity reaches"),
        pytest.param(
            "node1", [NOT_ENOUGH_SPACE, (ERR_REASON_BIND_CONFLICT,)], id="a selected node is checked too"
        ),
    ],
)
def test_each_node_needs_a_capacity_that_reaches_it(
    selected_node: str | None, expected: list[tuple[str, ...]]
) -> None:
    """Local storage: 4Gi free on node1, 8Gi on node2, for a 5Gi claim."""
    annotations = {} if selected_node is None else {"volume.kubernetes.io/selected-node": selected_node}
    claim = pvc("local", "anywhere", size="5Gi", annotations=annotations)
    capacities = [capacity("n1", "anywhere", "node1", "4Gi"), capacity("n2", "anywhere", "node2", "8Gi")]
    snap = snapshot(
        NODE1, NODE2, objects=capacity_objects([claim], capacities, [csi_driver(PROVISIONER, True)])
    )
    assert [run_filter(CheckVolumeBinding(), uses("local"), info, snap) for info in snap.nodes] == expected


def test_reserve_refuses_a_node_without_capacity() -> None:
    """Reserve (AssumePodVolumes) makes the filter's choice: a node without room is refused, one
    with room gets the claim with selected-node."""
    claim = pvc("local", "anywhere", size="5Gi")
    objs = capacity_objects(
        [claim], [capacity("n2", "anywhere", "node2", "8Gi")], [csi_driver(PROVISIONER, True)]
    )
    with pytest.raises(VolumeBindingError):
        assume_pod_volumes(uses("local"), objs, node_info(NODE1))
    volumes = assume_pod_volumes(uses("local"), objs, node_info(NODE2))
    assert volumes is not None
    (provision,) = volumes.provisions
    assert provision.assumed["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "node2"
