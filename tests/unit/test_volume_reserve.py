"""Volume binding Reserve (the volume binder's AssumePodVolumes and GetBindVolumeToClaim): which PV
each claim takes on the chosen node, how the rest of a batch and the cache see it taken, and how an
assumption is forgotten."""

from __future__ import annotations

import random

import pytest

from kubesched.algorithm.batch import schedule_batch
from kubesched.algorithm.generic import FitError, ScheduleResult
from kubesched.algorithm.volume_reserve import (
    ANN_BOUND_BY_CONTROLLER,
    ScheduledWithVolumes,
    VolumeBindingError,
    assume_pod_volumes,
)
from kubesched.model.nodeinfo import Snapshot
from kubesched.model.objects import Pod
from kubesched.plugins.volume_binding.filtering import ANN_SELECTED_NODE, ERR_REASON_BIND_CONFLICT
from kubesched.policy.compile import compile_policy, default_algorithm
from kubesched.runtime.cache import SchedulerCache
from kubesched.runtime.volumes import assume_in_cache, forget_in_cache
from kubesched_dev.fixtures import model_node, model_pod, node_info

from .plugins.test_volume_binding import NODE_A, NODE_B, objects, pv, pvc

ALGORITHM = default_algorithm()


def claimant(name: str, *claims: str) -> Pod:
    return model_pod(name, volumes=[{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims])


def test_the_smallest_fitting_pv_the_node_accepts_is_chosen() -> None:
    objs = objects(
        [pvc("c", size="1Gi")],
        [pv("big", size="5Gi", zones=("a",)), pv("small", size="2Gi", zones=("a",)), pv("b", zones=("b",))],
    )
    volumes = assume_pod_volumes(claimant("p", "c"), objs, node_info(NODE_A))
    assert volumes is not None and not volumes.provisions
    (binding,) = volumes.bindings
    assert binding.pv["metadata"]["name"] == "small"
    ref = binding.assumed["spec"]["claimRef"]
    assert ref == {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": "default",
        "name": "c",
        "uid": "uid-c",
    }
    assert binding.assumed["metadata"]["annotations"] == {ANN_BOUND_BY_CONTROLLER: "yes"}
    # The objects after the assumption hold the claimed PV; the originals are left untouched.
    assert volumes.objects.persistent_volumes["small"] is binding.assumed
    assert "claimRef" not in objs.persistent_volumes["small"]["spec"]


def test_each_claim_of_a_pod_takes_its_own_pv() -> None:
    objs = objects(
        [pvc("c1", size="1Gi"), pvc("c2", size="2Gi")],
        [pv("pv-1", size="1Gi", zones=("a",)), pv("pv-2", size="3Gi", zones=("a",))],
    )
    volumes = assume_pod_volumes(claimant("p", "c1", "c2"), objs, node_info(NODE_A))
    assert volumes is not None
    chosen = {b.claim["metadata"]["name"]: b.pv["metadata"]["name"] for b in volumes.bindings}
    assert chosen == {"c1": "pv-1", "c2": "pv-2"}


def test_a_pv_prebound_to_the_claim_keeps_its_author_mark() -> None:
    objs = objects([pvc("c")], [pv("mine", claim="c")])
    volumes = assume_pod_volumes(claimant("p", "c"), objs, node_info(NODE_A))
    assert volumes is not None
    (binding,) = volumes.bindings
    assert binding.assumed["spec"]["claimRef"]["uid"] == "uid-c"
    assert ANN_BOUND_BY_CONTROLLER not in (binding.assumed["metadata"].get("annotations") or {})


def test_a_claim_no_pv_fits_is_provisioned_on_the_node() -> None:
    objs = objects([pvc("c", size="10Gi")], [pv("small", size="1Gi")])
    volumes = assume_pod_volumes(claimant("p", "c"), objs, node_info(NODE_B))
    assert volumes is not None and not volumes.bindings
    (provision,) = volumes.provisions
    assert provision.assumed["metadata"]["annotations"][ANN_SELECTED_NODE] == "node-b"
    assert volumes.objects.persistent_volume_claims["default/c"] is provision.assumed


def test_nothing_to_bind_for_bound_claims_or_pods_without_claims() -> None:
    objs = objects([pvc("c", volume="pv", bound=True)], [pv("pv", claim="c")])
    assert assume_pod_volumes(claimant("p", "c"), objs, node_info(NODE_A)) is None
    assert assume_pod_volumes(model_pod("plain"), objs, node_info(NODE_A)) is None


def test_a_node_that_cannot_take_the_claims_is_an_error() -> None:
    objs = objects([pvc("c", storage_class="static")], [pv("a-only", storage_class="static", zones=("a",))])
    with pytest.raises(VolumeBindingError):
        assume_pod_volumes(claimant("p", "c"), objs, node_info(NODE_B))


def test_the_next_pod_of_a_batch_does_not_take_the_same_pv() -> None:
    # Two local PVs on node-a only, none elsewhere: three pods, each with its own claim.
    objs = objects(
        [pvc(f"c{i}", storage_class="static") for i in range(3)],
        [pv(f"pv-{i}", storage_class="static", zones=("a",)) for i in range(2)],
    )
    snap = Snapshot.of([node_info(NODE_A), node_info(NODE_B)], objs)
    pods = [claimant(f"p{i}", f"c{i}") for i in range(3)]
    outcomes, _ = schedule_batch({"default-scheduler": ALGORITHM}, pods, snap, random.Random(0), 0)
    first, second, third = outcomes
    assert isinstance(first, ScheduledWithVolumes) and isinstance(second, ScheduledWithVolumes)
    assert first.node_name == second.node_name == "node-a"
    taken = [o.volumes.bindings[0].pv["metadata"]["name"] for o in (first, second) if o.volumes]
    assert sorted(taken) == ["pv-0", "pv-1"]
    assert isinstance(third, FitError) and not isinstance(third, ScheduleResult)
    assert ERR_REASON_BIND_CONFLICT in third.summary()


def test_the_cache_holds_the_assumed_pv_until_forgotten() -> None:
    cache = SchedulerCache()
    cache.set_node(model_node("node-a", labels=dict(NODE_A.labels)))
    original = pv("local", storage_class="static", zones=("a",))
    cache.set_object("PersistentVolume", "local", original)
    cache.set_object("StorageClass", "static", objects([], []).storage_classes["static"])
    for name in ("c1", "c2"):
        cache.set_object("PersistentVolumeClaim", f"default/{name}", pvc(name, storage_class="static"))
    snap = cache.snapshot()
    volumes = assume_pod_volumes(claimant("p1", "c1"), snap.objects, snap.nodes[0])
    assert volumes is not None
    assume_in_cache(cache, volumes)
    # The next cycle: the PV is taken, another claim finds nothing.
    later = cache.snapshot()
    assert later.objects.persistent_volumes["local"]["spec"]["claimRef"]["name"] == "c1"
    with pytest.raises(FitError):
        ALGORITHM.schedule(claimant("p2", "c2"), later, random.Random(0))
    forget_in_cache(cache, volumes)
    assert cache.get_object("PersistentVolume", "local") is original
    ALGORITHM.schedule(claimant("p2", "c2"), cache.snapshot(), random.Random(0))


def test_forgetting_leaves_what_the_watch_brought_since() -> None:
    cache = SchedulerCache()
    cache.set_node(model_node("node-a", labels=dict(NODE_A.labels)))
    cache.set_object("PersistentVolume", "local", pv("local", zones=("a",)))
    cache.set_object("StorageClass", "wait", objects([], []).storage_classes["wait"])
    cache.set_object("PersistentVolumeClaim", "default/c", pvc("c"))
    snap = cache.snapshot()
    volumes = assume_pod_volumes(claimant("p", "c"), snap.objects, snap.nodes[0])
    assert volumes is not None
    assume_in_cache(cache, volumes)
    written = {**volumes.bindings[0].assumed, "status": {"phase": "Bound"}}
    cache.set_object("PersistentVolume", "local", written)  # the watch: our write landed
    forget_in_cache(cache, volumes)
    assert cache.get_object("PersistentVolume", "local") is written


def test_the_cache_holds_the_claim_to_provision_until_forgotten() -> None:
    cache = SchedulerCache()
    cache.set_node(model_node("node-b", labels=dict(NODE_B.labels)))
    cache.set_object("StorageClass", "wait", objects([], []).storage_classes["wait"])
    original = pvc("c")
    cache.set_object("PersistentVolumeClaim", "default/c", original)
    snap = cache.snapshot()
    volumes = assume_pod_volumes(claimant("p", "c"), snap.objects, snap.nodes[0])
    assert volumes is not None and not volumes.bindings
    assume_in_cache(cache, volumes)
    held = cache.get_object("PersistentVolumeClaim", "default/c")
    assert held is not None and held["metadata"]["annotations"][ANN_SELECTED_NODE] == "node-b"
    forget_in_cache(cache, volumes)
    assert cache.get_object("PersistentVolumeClaim", "default/c") is original


def test_a_policy_without_check_volume_binding_binds_no_volumes() -> None:
    objs = objects([pvc("c", storage_class="static")], [pv("local", storage_class="static", zones=("a",))])
    snap = Snapshot.of([node_info(NODE_A)], objs)
    no_volumes = compile_policy({"predicates": [{"name": "PodFitsResources"}], "priorities": []})
    (plain,), _ = schedule_batch(
        {"default-scheduler": no_volumes}, [claimant("p", "c")], snap, random.Random(0), 0
    )
    (bound,), _ = schedule_batch(
        {"default-scheduler": ALGORITHM}, [claimant("p", "c")], snap, random.Random(0), 0
    )
    assert isinstance(plain, ScheduleResult) and not isinstance(plain, ScheduledWithVolumes)
    assert isinstance(bound, ScheduledWithVolumes)
