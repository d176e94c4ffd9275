"""NoDiskConflict (volumerestrictions/volume_restrictions.go)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.plugins.volume_restrictions.filtering import ERR_REASON_DISK_CONFLICT, NoDiskConflict
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter

DISK = (ERR_REASON_DISK_CONFLICT,)


def gce(pd: str, ro: bool = False) -> dict[str, Any]:
    return {"name": "v", "gcePersistentDisk": {"pdName": pd, "readOnly": ro}}


def ebs(volume_id: str, ro: bool = False) -> dict[str, Any]:
    return {"name": "v", "awsElasticBlockStore": {"volumeID": volume_id, "readOnly": ro}}


def iscsi(iqn: str, ro: bool = False) -> dict[str, Any]:
    return {"name": "v", "iscsi": {"targetPortal": "1.2.3.4:3260", "iqn": iqn, "lun": 0, "readOnly": ro}}


def rbd(monitors: list[str], image: str, pool: str | None = None, ro: bool = False) -> dict[str, Any]:
    source: dict[str, Any] = {"monitors": monitors, "image": image, "readOnly": ro}
    if pool is not None:
        source["pool"] = pool
    return {"name": "v", "rbd": source}


@pytest.mark.parametrize(
    ("name", "wanted", "existing", "expected"),
    [
        ("no volumes", [], [gce("a")], ()),
        ("gce same disk", [gce("a")], [gce("a")], DISK),
        ("gce other disk", [gce("a")], [gce("b")], ()),
        ("gce both read-only", [gce("a", True)], [gce("a", True)], ()),
        ("gce one read-only", [gce("a", True)], [gce("a")], DISK),
        ("ebs same volume, even read-only", [ebs("vol-1", True)], [ebs("vol-1", True)], DISK),
        ("ebs other volume", [ebs("vol-1")], [ebs("vol-2")], ()),
        ("iscsi same iqn", [iscsi("iqn.a")], [iscsi("iqn.a")], DISK),
        ("iscsi both read-only", [iscsi("iqn.a", True)], [iscsi("iqn.a", True)], ()),
        ("rbd overlapping monitors", [rbd(["m1", "m2"], "img")], [rbd(["m2", "m3"], "img")], DISK),
        ("rbd disjoint monitors", [rbd(["m1"], "img")], [rbd(["m2"], "img")], ()),
        ("rbd other image", [rbd(["m1"], "img")], [rbd(["m1"], "other")], ()),
        ("rbd pool defaults to rbd", [rbd(["m1"], "img")], [rbd(["m1"], "img", pool="rbd")], DISK),
        ("rbd other pool", [rbd(["m1"], "img")], [rbd(["m1"], "img", pool="ssd")], ()),
        ("rbd both read-only", [rbd(["m1"], "img", ro=True)], [rbd(["m1"], "img", ro=True)], ()),
        ("different kinds never conflict", [gce("a")], [ebs("a")], ()),
    ],
)
def test_disk_conflict(
    name: str, wanted: list[dict[str, Any]], existing: list[dict[str, Any]], expected: tuple[str, ...]
) -> None:
    info = node_info(model_node("n"), [model_pod("other"), model_pod("existing", volumes=existing)])
    assert run_filter(NoDiskConflict(), model_pod(volumes=wanted), info) == expected
