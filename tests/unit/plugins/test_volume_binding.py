"""CheckVolumeBinding (volumebinding/volume_binding.go and the volume binder's FindPodVolumes in
controller/volume/scheduling/scheduler_binder.go, FindMatchingVolume in
persistentvolume/util/util.go): the cases of volume_binding_test.go and scheduler_binder_test.go
restated on kubesched's objects."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.model.nodeinfo import ClusterObjects
from kubesched.model.objects import Pod
from kubesched.plugins.framework import SKIP, Reject
from kubesched.plugins.volume_binding.filtering import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
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
