"""NoDiskConflict (volumerestrictions/volume_restrictions.go): 1.20's disk conflicts, and 1.32's
ReadWriteOncePod check through the plugin, the algorithm, preemption and `kubesched explain`."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kubesched.algorithm.batch import schedule_batch
from kubesched.algorithm.generic import FitError, ScheduleResult
from kubesched.algorithm.preemption import ERR_REASON_NO_VICTIMS, PreemptionOutcome, preempt
from kubesched.cli import main
from kubesched.model.nodeinfo import ClusterObjects, Snapshot
from kubesched.model.objects import Pod
from kubesched.plugins.framework import SKIP
from kubesched.plugins.volume_restrictions.filtering import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
    READ_WRITE_ONCE_POD,
    NoDiskConflict,
)
from kubesched.policy.compile import default_algorithm
from kubesched.tools.snapshot import ClusterState, save
from kubesched_dev.fixtures import make_node, make_pod, model_node, model_pod, node_info, run_filter, snapshot

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


# ------------------------------------------------------------------------------ ReadWriteOncePod

RWOP = (ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,)
RWOP_1, RWOP_2, RWX, RWO = "claim-with-rwop-1", "claim-with-rwop-2", "claim-with-rwx", "claim-with-rwo"
ALGORITHM = default_algorithm()


def claim(name: str, mode: str = READ_WRITE_ONCE_POD, namespace: str = "default") -> dict[str, Any]:
    """A claim with one access mode, bound to a PV of its own (CheckVolumeBinding lets it pass)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
        },
        "spec": {"accessModes": [mode], "volumeName": f"pv-{namespace}-{name}"},
    }


def volume_of(made: dict[str, Any]) -> dict[str, Any]:
    """The PV bound to claim `made`, which every node accepts."""
    meta = made["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": made["spec"]["volumeName"]},
        "spec": {
            "accessModes": list(made["spec"]["accessModes"]),
            "claimRef": {"name": meta["name"], "namespace": meta["namespace"]},
        },
        "status": {"phase": "Bound"},
    }


def claims(*made: dict[str, Any]) -> ClusterObjects:
    return ClusterObjects(
        persistent_volume_claims={f"{c['metadata']['namespace']}/{c['metadata']['name']}": c for c in made},
        persistent_volumes={c["spec"]["volumeName"]: volume_of(c) for c in made},
    )


CLAIMS = claims(
    claim(RWOP_1),
    claim(RWOP_2),
    claim(RWX, "ReadWriteMany"),
    claim(RWO, "ReadWriteOnce"),
    claim(RWOP_1, namespace="other"),
)


def user(
    name: str,
    *names: str,
    priority: int = 0,
    namespace: str = "default",
    node: str = "",
    disks: tuple[dict[str, Any], ...] = (),
    deleting: bool = False,
) -> Pod:
    """st.MakePod().PVC(...): a 100m pod with a persistentVolumeClaim volume per claim name."""
    volumes = [*disks, *({"name": n, "persistentVolumeClaim": {"claimName": n}} for n in names)]
    return model_pod(
        name, namespace, cpu="100m", volumes=volumes, priority=priority, node_name=node, deleting=deleting
    )


WITH_ONE = user("pod-with-one-pvc", RWOP_1, node="node-1")
WITH_TWO = user("pod-with-two-pvcs", RWOP_1, RWOP_2, node="node-1")
WITH_RWX = user("pod-with-rwx", RWX, node="node-1")


@pytest.mark.parametrize(
    ("name", "pending", "placed", "objs", "prefiltered", "reasons"),
    [
        ("nothing", model_pod(), [], ClusterObjects(), SKIP, ()),
        # 1.32 refuses here (UnschedulableAndUnresolvable); 1.20's NoDiskConflict never looked, and
        # CheckVolumeBinding reports the missing claim (test_a_missing_claim_...).
        ("failed to get PVC", WITH_ONE, [], ClusterObjects(), SKIP, ()),
        ("no access mode conflict", WITH_ONE, [WITH_RWX], CLAIMS, SKIP, ()),
        (
            "access mode conflict, unschedulable",
            user("pod-with-one-conflict", RWOP_1, node="node-1"),
            [WITH_ONE, WITH_RWX],
            CLAIMS,
            1,
            RWOP,
        ),
        (
            "two conflicts, unschedulable",
            user("pod-with-two-conflicts", RWOP_1, RWOP_2, node="node-1"),
            [WITH_TWO, WITH_RWX],
            CLAIMS,
            2,
            RWOP,
        ),
    ],
)
def test_access_mode_conflicts(
    name: str,
    pending: Pod,
    placed: list[Pod],
    objs: ClusterObjects,
    prefiltered: Any,
    reasons: tuple[str, ...],
) -> None:
    """TestAccessModeConflicts of 1.32's volumerestrictions/volume_restrictions_test.go: PreFilter's
    status (Skip, UnschedulableAndUnresolvable as a Reject, or success with conflictingPVCRefCount)
    and then Filter's."""
    info = node_info(model_node("node-1"), placed)
    state = NoDiskConflict().prefilter(pending, snapshot(info, objects=objs))
    if isinstance(prefiltered, int):
        assert state.conflicting == prefiltered
        assert tuple(NoDiskConflict().filter(pending, state, info)) == reasons
    else:
        assert state == prefiltered


@pytest.mark.parametrize(
    ("name", "pending", "placed", "expected"),
    [
        ("an unused ReadWriteOncePod claim", user("p", RWOP_1), [user("h", RWOP_2)], ()),
        ("a ReadWriteOnce claim in use, as in 1.20", user("p", RWO), [user("h", RWO)], ()),
        (
            "a claim of the same name in another namespace",
            user("p", RWOP_1),
            [user("h", RWOP_1, namespace="other")],
            (),
        ),
        ("a terminating holder still holds it", user("p", RWOP_1), [user("h", RWOP_1, deleting=True)], RWOP),
        (
            "a disk conflict is reported first",
            user("p", RWOP_1, disks=(gce("a"),)),
            [user("h", RWOP_1, disks=(gce("a"),))],
            DISK,
        ),
        (
            "no disk conflict, the claim in use",
            user("p", RWOP_1, disks=(gce("b"),)),
            [user("h", RWOP_1, disks=(gce("a"),))],
            RWOP,
        ),
    ],
)
def test_which_claims_conflict(name: str, pending: Pod, placed: list[Pod], expected: tuple[str, ...]) -> None:
    info = node_info(model_node("n"), placed)
    assert run_filter(NoDiskConflict(), pending, info, snapshot(info, objects=CLAIMS)) == expected


def test_a_claim_in_use_on_one_node_fails_every_node() -> None:
    snap = snapshot(node_info(model_node("a"), [user("holder", RWOP_1)]), model_node("b"), objects=CLAIMS)
    pending = user("second", RWOP_1)
    assert [run_filter(NoDiskConflict(), pending, info, snap) for info in snap.nodes] == [RWOP, RWOP]
    with pytest.raises(FitError) as caught:
        ALGORITHM.schedule(pending, snap, random.Random(0))
    assert caught.value.summary() == f"0/2 nodes are available: 2 {ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT}."


def test_filter_counts_the_node_it_is_given_as_remove_pod_and_add_pod_do() -> None:
    """1.32's PreFilterExtensions RemovePod and AddPod update conflictingPVCRefCount for the pods
    preemption takes off a node and puts back: here Filter is handed that node."""
    holder = user("holder", RWOP_1)
    snap = snapshot(node_info(model_node("a"), [holder, user("idle", RWX)]), model_node("b"), objects=CLAIMS)
    pending = user("second", RWOP_1)
    state = NoDiskConflict().prefilter(pending, snap)
    a, b = snap.nodes
    removed = a.without_pod(holder.uid)
    assert NoDiskConflict().filter(pending, state, removed) == ()  # RemovePod: count 1 - 1
    assert NoDiskConflict().filter(pending, state, removed.with_pod(holder)) == RWOP  # AddPod again
    # A node whose own pods do not use the claim cannot lower the count held elsewhere.
    assert NoDiskConflict().filter(pending, state, b.with_pod(user("other", RWX))) == RWOP
    # Nor can any change to it once the holder is gone, unless a new user comes (AddPod).
    assert NoDiskConflict().filter(pending, state, removed.with_pod(user("new", RWOP_1))) == RWOP


def test_a_pod_assumed_earlier_in_the_batch_holds_the_claim() -> None:
    snap = snapshot(model_node("a"), model_node("b"), objects=CLAIMS)
    first, second = user("first", RWOP_1), user("second", RWOP_1)
    outcomes, _ = schedule_batch({"default-scheduler": ALGORITHM}, [first, second], snap, random.Random(0), 0)
    assert isinstance(outcomes[0], ScheduleResult)
    assert isinstance(outcomes[1], FitError)
    assert set(outcomes[1].node_reasons.values()) == {RWOP}


def test_a_nominated_pod_using_the_claim_holds_it_on_every_node() -> None:
    """Nominated pods are placed in the snapshot each pod sees (algorithm/batch.py), so one using the
    claim counts on every node; 1.32 adds it (AddPod) only on its nominated node's pass."""
    snap = snapshot(model_node("a"), model_node("b"), objects=CLAIMS)
    nominee = user("nominee", RWOP_1, priority=10)
    outcomes, _ = schedule_batch(
        {"default-scheduler": ALGORITHM},
        [user("low", RWOP_1, priority=1)],
        snap,
        random.Random(0),
        0,
        nominated={nominee.uid: (nominee, "a")},
    )
    assert isinstance(outcomes[0], FitError)
    assert set(outcomes[0].node_reasons.values()) == {RWOP}


def preemption_of(pending: Pod, snap: Snapshot) -> tuple[str, list[str], str]:
    with pytest.raises(FitError) as caught:
        ALGORITHM.schedule(pending, snap, random.Random(0))
    found = preempt(caught.value, snap, ALGORITHM.predicates, (), random.Random(0))
    return found.node_name, [v.name for v in found.victims], found.message


@pytest.mark.parametrize(
    ("holder_priority", "expected"),
    [
        (0, ("a", ["holder"], "")),
        (10, ("", [], f"0/2 nodes are available: 1 {ERR_REASON_NO_VICTIMS}, 1 {RWOP[0]}.")),
    ],
)
def test_preemption_evicts_the_holder_of_a_lower_priority(
    holder_priority: int, expected: tuple[str, list[str], str]
) -> None:
    """The conflict is Unschedulable, not UnschedulableAndUnresolvable: preemption tries each node,
    and only where the holder runs does evicting it (RemovePod) make the pod fit; evicting b's pod
    leaves the claim held."""
    snap = snapshot(
        node_info(model_node("a"), [user("holder", RWOP_1, priority=holder_priority)]),
        node_info(model_node("b"), [user("idle", RWX, priority=0)]),
        objects=CLAIMS,
    )
    assert preemption_of(user("second", RWOP_1, priority=10), snap) == expected


def test_a_missing_claim_leaves_preemption_nothing_to_do() -> None:
    """CheckVolumeBinding refuses the pod, unresolvably, with the message 1.32's VolumeRestrictions
    gives: NoDiskConflict leaves it to it, as in 1.20."""
    snap = snapshot(node_info(model_node("a"), [user("low", priority=0)]), objects=CLAIMS)
    pending = user("second", "nowhere", priority=10)
    with pytest.raises(FitError) as caught:
        ALGORITHM.schedule(pending, snap, random.Random(0))
    assert caught.value.node_reasons == {"a": ('persistentvolumeclaim "nowhere" not found',)}
    outcomes, _ = schedule_batch({"default-scheduler": ALGORITHM}, [pending], snap, random.Random(0), 0)
    assert isinstance(outcomes[0], PreemptionOutcome) and outcomes[0].preemption.victims == ()


def test_explain_from_a_snapshot_refuses_the_second_user_of_a_claim(tmp_path: Path) -> None:
    """The audit's case: `holder` on n1 uses a ReadWriteOncePod claim, pending `second` names it too;
    kube-scheduler 1.32 fits it nowhere. With a ReadWriteOnce claim it fits, as in 1.20."""

    def explained(mode: str) -> dict[str, Any]:
        made = claim("data", mode)
        volume = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
        holder = make_pod("holder", cpu="100m", node_name="n1")
        second = make_pod("second", cpu="100m")
        for raw in (holder, second):
            raw["spec"]["volumes"] = volume
        objs = {"PersistentVolume": [volume_of(made)], "PersistentVolumeClaim": [made]}
        path = tmp_path / f"{mode}.json"
        save(ClusterState([make_node("n1"), make_node("n2")], [holder, second], objs, []), str(path))
        outcome = CliRunner().invoke(
            main, ["explain", "default/second", "--snapshot", str(path), "-o", "json"]
        )
        assert outcome.exit_code == 0, outcome.output
        document: dict[str, Any] = json.loads(outcome.output)
        return document

    refused = explained(READ_WRITE_ONCE_POD)
    assert refused["message"] == f"0/2 nodes are available: 2 {ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT}."
    assert refused["feasible"] == []
    assert [(r["node"], r["reasons"]) for r in refused["rejected"]] == [
        (node, [{"by": "NoDiskConflict", "reason": ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT}])
        for node in ("n1", "n2")
    ]
    fits = explained("ReadWriteOnce")
    assert fits["rejected"] == [] and len(fits["feasible"]) == 2
