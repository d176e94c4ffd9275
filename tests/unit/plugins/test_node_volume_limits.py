"""MaxEBSVolumeCount (and the other in-tree limits) and MaxCSIVolumeCountPred
(nodevolumelimits/non_csi.go, csi.go; volume/util/attach_limit.go), the cases of non_csi_test.go
and csi_test.go restated on kubesched's objects, with 1.20's default feature gates (no in-tree
volume migrated to CSI)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.model.nodeinfo import ClusterObjects
from kubesched.model.objects import Pod
from kubesched.plugins.framework import SKIP, Reject
from kubesched.plugins.node_volume_limits.filtering import (
    ERR_REASON_CLAIM_WITHOUT_NAME,
    ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    MaxCSIVolumeCount,
    MaxEBSVolumeCount,
    MaxGCEPDVolumeCount,
    csi_attach_limit_key,
)
from kubesched.policy.compile import compile_policy
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter, snapshot

EXCEEDED = (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,)


def ebs(volume_id: str) -> dict[str, Any]:
    return {"name": volume_id, "awsElasticBlockStore": {"volumeID": volume_id}}


def claim(name: str) -> dict[str, Any]:
    return {"name": name, "persistentVolumeClaim": {"claimName": name}}


def host_path(name: str) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": f"/{name}"}}


def pvc(name: str, volume: str = "", storage_class: str | None = "ebs-sc") -> dict[str, Any]:
    spec: dict[str, Any] = {"volumeName": volume}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


def pv(name: str, source: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": source}


OBJECTS = ClusterObjects(
    persistent_volume_claims={
        f"default/{c['metadata']['name']}": c
        for c in (
            pvc("ebs-claim", "ebs-pv"),
            pvc("nfs-claim", "nfs-pv"),
            pvc("unbound", ""),
            pvc("unbound-2", ""),
            pvc("unbound-other-sc", "", "standard"),
            pvc("unbound-invalid-sc", "", "nope"),
            pvc("deleted-pv", "gone"),
            pvc("csi-claim", "csi-pv", "csi-sc"),
            pvc("csi-claim-2", "csi-pv-2", "csi-sc"),
            pvc("csi-unbound", "", "csi-sc"),
            pvc("intree-unbound", "", "ebs-sc"),
        )
    },
    persistent_volumes={
        "ebs-pv": pv("ebs-pv", {"awsElasticBlockStore": {"volumeID": "ebs-from-pv"}}),
        "nfs-pv": pv("nfs-pv", {"nfs": {"server": "s", "path": "/"}}),
        "csi-pv": pv("csi-pv", {"csi": {"driver": "csi.example.com", "volumeHandle": "h1"}}),
        "csi-pv-2": pv("csi-pv-2", {"csi": {"driver": "csi.example.com", "volumeHandle": "h2"}}),
    },
    storage_classes={
        "ebs-sc": {"metadata": {"name": "ebs-sc"}, "provisioner": "kubernetes.io/aws-ebs"},
        "standard": {"metadata": {"name": "standard"}, "provisioner": "example.com/other"},
        "csi-sc": {"metadata": {"name": "csi-sc"}, "provisioner": "csi.example.com"},
    },
    csi_nodes={
        "csi-node": {
            "metadata": {"name": "csi-node"},
            "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "x", "allocatable": {"count": 1}}]},
        }
    },
)


def pod_with(*volumes: dict[str, Any]) -> Pod:
    return model_pod("p", volumes=list(volumes))


def verdict(predicate: Any, new: Pod, existing: list[Pod], node: Any) -> tuple[str, ...]:
    info = node_info(node, existing)
    return run_filter(predicate, new, info, snapshot(info, objects=OBJECTS))


EBS_LIMIT_4 = model_node("n", extra={"attachable-volumes-aws-ebs": "4"})
EBS_LIMIT_2 = model_node("n", extra={"attachable-volumes-aws-ebs": "2"})


@pytest.mark.parametrize(
    ("new", "existing", "node", "expected"),
    [
        pytest.param(
            pod_with(ebs("a")),
            [pod_with(ebs("b"), ebs("c"))],
            EBS_LIMIT_4,
            (),
            id="fits when capacity >= volumes",
        ),
        pytest.param(
            pod_with(ebs("a"), ebs("d")),
            [pod_with(ebs("b"), ebs("c"))],
            model_node("n", extra={"attachable-volumes-aws-ebs": "3"}),
            EXCEEDED,
            id="doesn't fit when capacity < volumes",
        ),
        pytest.param(
            pod_with(ebs("a"), host_path("x")),
            [pod_with(ebs("b"))],
            EBS_LIMIT_2,
            (),
            id="new pod's count ignores non-EBS volumes",
        ),
        pytest.param(
            pod_with(ebs("a")),
            [pod_with(ebs("b"), host_path("x"), claim("nfs-claim"))],
            EBS_LIMIT_2,
            (),
            id="existing pods' counts ignore non-EBS volumes",
        ),
        pytest.param(
            pod_with(claim("ebs-claim")),
            [pod_with(ebs("b"), ebs("c"))],
            EBS_LIMIT_2,
            EXCEEDED,
            id="new pod's count considers PVCs backed by EBS volumes",
        ),
        pytest.param(
            pod_with(claim("nfs-claim")),
            [pod_with(ebs("b"), ebs("c"))],
            EBS_LIMIT_2,
            (),
            id="new pod's count ignores PVCs not backed by EBS volumes",
        ),
        pytest.param(
            pod_with(ebs("a")),
            [pod_with(claim("ebs-claim"), ebs("c"))],
            EBS_LIMIT_2,
            EXCEEDED,
            id="existing pods' counts consider PVCs backed by EBS volumes",
        ),
        pytest.param(
            pod_with(ebs("b")),
            [pod_with(ebs("b"), ebs("c"))],
            EBS_LIMIT_2,
            (),
            id="already-mounted EBS volumes are always ok to allow",
        ),
        pytest.param(
            pod_with(ebs("a")),
            [pod_with(ebs("b")), pod_with(ebs("b"))],
            EBS_LIMIT_2,
            (),
            id="the same EBS volumes are not counted multiple times",
        ),
        pytest.param(
            pod_with(claim("missing")),
            [pod_with(ebs("b"), ebs("c"))],
            EBS_LIMIT_2,
            (),
            id="missing PVC is not counted towards the PV limit",
        ),
        pytest.param(
            pod_with(claim("unbound-invalid-sc")),
            [pod_with(ebs("b"), ebs("c"))],
            EBS_LIMIT_2,
            (),
            id="unbound PVC with invalid SC is not counted",
        ),
        pytest.param(
            pod_with(claim("unbound-other-sc")),
            [pod_with(ebs("b"), ebs("c"))],
            EBS_LIMIT_2,
            (),
            id="unbound PVC from different provisioner is not counted",
        ),
        pytest.param(
            pod_with(claim("unbound")),
            [pod_with(ebs("b"), ebs("c"))],
            EBS_LIMIT_2,
            EXCEEDED,
            id="pod with unbound PVC is counted towards the PV limit",
        ),
        pytest.param(
            pod_with(claim("deleted-pv")),
            [pod_with(ebs("b"), ebs("c"))],
            EBS_LIMIT_2,
            EXCEEDED,
            id="pod with missing PV is counted towards the PV limit",
        ),
        pytest.param(
            pod_with(claim("unbound")),
            [pod_with(claim("unbound"), ebs("c"))],
            EBS_LIMIT_2,
            (),
            id="the same unbound PVC in multiple pods is counted only once",
        ),
        pytest.param(
            pod_with(claim("unbound-2")),
            [pod_with(claim("unbound"), ebs("c"))],
            EBS_LIMIT_2,
            EXCEEDED,
            id="two different unbound PVCs are counted as two volumes",
        ),
    ],
)
def test_max_ebs_volume_count(new: Pod, existing: list[Pod], node: Any, expected: tuple[str, ...]) -> None:
    assert verdict(MaxEBSVolumeCount(), new, existing, node) == expected


def test_ebs_default_limits_depend_on_the_instance_type(monkeypatch: pytest.MonkeyPatch) -> None:
    """getMaxEBSVolume: 39 by default, 25 on Nitro types (^[cmr]5.*|t3|z1d); $KUBE_MAX_PD_VOLS overrides
    (read when the policy is compiled)."""
    existing = [pod_with(*[ebs(f"v{i}") for i in range(25)])]
    nitro = model_node("n", labels={"node.kubernetes.io/instance-type": "m5.large"})
    plain = model_node("n", labels={"node.kubernetes.io/instance-type": "m4.large"})
    assert verdict(MaxEBSVolumeCount(), pod_with(ebs("new")), existing, nitro) == EXCEEDED
    assert verdict(MaxEBSVolumeCount(), pod_with(ebs("new")), existing, plain) == ()
    monkeypatch.setenv("KUBE_MAX_PD_VOLS", "10")
    assert verdict(_compiled_ebs(), pod_with(ebs("new")), existing, plain) == EXCEEDED
    monkeypatch.setenv("KUBE_MAX_PD_VOLS", "not a number")
    assert verdict(_compiled_ebs(), pod_with(ebs("new")), existing, plain) == ()


def _compiled_ebs() -> MaxEBSVolumeCount:
    policy = compile_policy({"predicates": [{"name": "MaxEBSVolumeCount"}]})
    (found,) = [p for p in policy.predicates if isinstance(p, MaxEBSVolumeCount)]
    return found


def test_other_kinds_count_their_own_volumes_only() -> None:
    gce = {"name": "g", "gcePersistentDisk": {"pdName": "disk-1"}}
    node = model_node("n", extra={"attachable-volumes-gce-pd": "1"})
    assert verdict(MaxGCEPDVolumeCount(), pod_with(gce), [pod_with(ebs("b"))], node) == ()
    other = {"name": "h", "gcePersistentDisk": {"pdName": "disk-2"}}
    assert verdict(MaxGCEPDVolumeCount(), pod_with(gce), [pod_with(other)], node) == EXCEEDED


def test_a_claim_without_a_name_fails_every_node() -> None:
    state = MaxEBSVolumeCount().prefilter(pod_with(claim("")), snapshot(model_node("n"), objects=OBJECTS))
    assert state == Reject((ERR_REASON_CLAIM_WITHOUT_NAME,))
    assert MaxEBSVolumeCount().prefilter(pod_with(host_path("x")), snapshot(model_node("n"))) is SKIP


CSI_NODE = model_node("csi-node")


@pytest.mark.parametrize(
    ("new", "existing", "node", "expected"),
    [
        pytest.param(
            pod_with(claim("csi-claim")), [], CSI_NODE, (), id="one CSI volume within the CSINode count"
        ),
        pytest.param(
            pod_with(claim("csi-claim")),
            [pod_with(claim("csi-claim-2"))],
            CSI_NODE,
            EXCEEDED,
            id="a second handle of the driver exceeds the CSINode count",
        ),
        pytest.param(
            pod_with(claim("csi-claim")),
            [pod_with(claim("csi-claim"))],
            CSI_NODE,
            (),
            id="the same volume handle is not counted twice",
        ),
        pytest.param(
            pod_with(claim("csi-unbound")),
            [pod_with(claim("csi-claim-2"))],
            CSI_NODE,
            EXCEEDED,
            id="an unbound claim counts for its class's CSI provisioner",
        ),
        pytest.param(
            pod_with(claim("intree-unbound")),
            [pod_with(claim("csi-claim-2"))],
            CSI_NODE,
            (),
            id="an in-tree provisioner is never counted (migration off)",
        ),
        pytest.param(
            pod_with(claim("csi-claim")),
            [pod_with(claim("csi-claim-2"))],
            model_node("no-limits"),
            (),
            id="a node without limits always fits",
        ),
        pytest.param(
            pod_with(claim("csi-claim")),
            [pod_with(claim("csi-claim-2"))],
            model_node("n", extra={"attachable-volumes-csi-csi.example.com": "1"}),
            EXCEEDED,
            id="limits from the node's attachable-volumes-csi allocatable",
        ),
    ],
)
def test_max_csi_volume_count(new: Pod, existing: list[Pod], node: Any, expected: tuple[str, ...]) -> None:
    assert verdict(MaxCSIVolumeCount(), new, existing, node) == expected


def test_csi_attach_limit_key() -> None:
    """GetCSIAttachLimitKey: names that would exceed 63 characters are cut to 23 plus a 16-hex hash."""
    assert csi_attach_limit_key("csi.example.com") == "attachable-volumes-csi-csi.example.com"
    long_key = csi_attach_limit_key("a-very-long-csi-driver-name.storage.example.com")
    assert long_key.startswith("attachable-volumes-csi-a-very-long-csi-drive") and len(long_key) == 62
