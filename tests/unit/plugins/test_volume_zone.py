"""NoVolumeZoneConflict (volumezone/volume_zone.go)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.model.nodeinfo import ClusterObjects
from kubesched.plugins.volume_zone.filtering import ERR_REASON_VOLUME_ZONE, NoVolumeZoneConflict
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter, snapshot

ZONE = "topology.kubernetes.io/zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"


def pvc(name: str, volume: str = "", storage_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"volumeName": volume}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


def pv(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {}}


OBJECTS = ClusterObjects(
    persistent_volume_claims={
        "default/in-a": pvc("in-a", "pv-a"),
        "default/in-a-or-b": pvc("in-a-or-b", "pv-ab"),
        "default/beta": pvc("beta", "pv-beta"),
        "default/regional": pvc("regional", "pv-region"),
        "default/no-zone": pvc("no-zone", "pv-plain"),
        "default/bad-label": pvc("bad-label", "pv-bad"),
        "default/lost-pv": pvc("lost-pv", "pv-gone"),
        "default/wait": pvc("wait", storage_class="late"),
        "default/immediate": pvc("immediate", storage_class="now"),
        "default/unset-mode": pvc("unset-mode", storage_class="unset"),
        "default/no-class-object": pvc("no-class-object", storage_class="missing"),
        "default/nothing": pvc("nothing"),
        "other/in-b": pvc("in-b", "pv-b"),
    },
    persistent_volumes={
        "pv-a": pv("pv-a", {ZONE: "a"}),
        "pv-b": pv("pv-b", {ZONE: "b"}),
        "pv-ab": pv("pv-ab", {ZONE: "a__b"}),
        "pv-beta": pv("pv-beta", {BETA_ZONE: "a"}),
        "pv-region": pv("pv-region", {REGION: "r2"}),
        "pv-plain": pv("pv-plain", {"other": "x"}),
        "pv-bad": pv("pv-bad", {ZONE: "b__"}),
    },
    storage_classes={
        "late": {"metadata": {"name": "late"}, "volumeBindingMode": "WaitForFirstConsumer"},
        "now": {"metadata": {"name": "now"}, "volumeBindingMode": "Immediate"},
        "unset": {"metadata": {"name": "unset"}},
    },
)


def claim(name: str) -> dict[str, Any]:
    return {"name": name, "persistentVolumeClaim": {"claimName": name}}


@pytest.mark.parametrize(
    ("name", "claims", "node_labels", "expected"),
    [
        ("same zone", ["in-a"], {ZONE: "a", REGION: "r1"}, ()),
        ("other zone", ["in-a"], {ZONE: "b"}, (ERR_REASON_VOLUME_ZONE,)),
        ("multi-zone PV label", ["in-a-or-b"], {ZONE: "b"}, ()),
        ("region mismatch", ["regional"], {ZONE: "a", REGION: "r1"}, (ERR_REASON_VOLUME_ZONE,)),
        # 1.20 compares label by label: a PV with the beta label needs the beta label on the node.
        ("beta PV label, GA node label only", ["beta"], {ZONE: "a"}, (ERR_REASON_VOLUME_ZONE,)),
        ("PV without zone labels", ["no-zone"], {ZONE: "a"}, ()),
        ("unparsable PV zone label is ignored", ["bad-label"], {ZONE: "a"}, ()),
        ("node without zone labels always fits", ["in-a", "lost-pv"], {"other": "x"}, ()),
        ("unbound claim, WaitForFirstConsumer", ["wait"], {ZONE: "a"}, ()),
        ("missing PVC", ["absent"], {ZONE: "a"}, ('persistentvolumeclaim "absent" not found',)),
        ("PVC of another namespace", ["in-b"], {ZONE: "a"}, ('persistentvolumeclaim "in-b" not found',)),
        ("missing PV", ["lost-pv"], {ZONE: "a"}, ('persistentvolume "pv-gone" not found',)),
        ("unbound claim, Immediate", ["immediate"], {ZONE: "a"}, ("PersistentVolume had no name",)),
        (
            "storage class without mode",
            ["unset-mode"],
            {ZONE: "a"},
            ('VolumeBindingMode not set for StorageClass "unset"',),
        ),
        (
            "missing storage class",
            ["no-class-object"],
            {ZONE: "a"},
            ('StorageClass "missing" claimed by PersistentVolumeClaim "no-class-object" not found',),
        ),
        (
            "no volume name nor class",
            ["nothing"],
            {ZONE: "a"},
            ("PersistentVolumeClaim had no pv name and storageClass name",),
        ),
        (
            "the first failing claim is reported",
            ["in-a", "absent", "regional"],
            {ZONE: "a"},
            ('persistentvolumeclaim "absent" not found',),
        ),
    ],
)
def test_volume_zone(
    name: str, claims: list[str], node_labels: dict[str, str], expected: tuple[str, ...]
) -> None:
    pod = model_pod(volumes=[claim(c) for c in claims] + [{"name": "scratch", "emptyDir": {}}])
    info = node_info(model_node("n", labels=node_labels))
    assert run_filter(NoVolumeZoneConflict(), pod, info, snapshot(info, objects=OBJECTS)) == expected
