"""Reconciling the cache with a listing after a watch gap: what vanished leaves, nothing newer does,
and a pod being bound is never forgotten."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from kubesched.kube.binding import Binder, BindOutcome, BindResult
from kubesched.kube.events import Recorder
from kubesched.kube.listing import Listing, not_newer, stale
from kubesched.model.objects import Pod
from kubesched.model.podgroup import LEGACY_POD_GROUP_LABEL, POD_GROUP_LABEL
from kubesched.policy.compile import default_algorithm
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings
from kubesched_dev.fixtures import make_node, make_pod, wait_for

NAME = "ks"


def at(raw: dict[str, Any], rv: int) -> dict[str, Any]:
    """The object as the API server would send it at resourceVersion `rv`."""
    raw["metadata"]["resourceVersion"] = str(rv)
    return raw


@pytest.mark.parametrize(
    ("cached", "listed", "rv", "keep", "expected"),
    [
        ("absent from the listing, older", {}, "100", (), ["a"]),
        ("absent from the listing, as old", {}, "50", (), ["a"]),
        ("in the listing", {"a"}, "100", (), []),
        ("created after the listing", {}, "40", (), []),
        ("kept (being bound)", {}, "100", ("a",), []),
        ("listing version not a revision", {}, "", (), []),
    ],
)
def test_stale_keys(
    cached: str, listed: set[str], rv: str, keep: tuple[str, ...], expected: list[str]
) -> None:
    assert stale({"a": "50"}, Listing.of(listed, rv), keep) == expected, cached


@pytest.mark.parametrize("seen", ["", "abc", "-1", "1e3"])
def test_a_version_that_is_no_revision_is_never_called_stale(seen: str) -> None:
    assert not not_newer(seen, Listing.of((), "100"))


class HeldBinder:
    """Binds succeed, but only once released: a bind stays in flight as long as the test wants."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def bind(self, pod: Pod, node_name: str, extender: object = None, **_: object) -> BindResult:
        await self.release.wait()
        return BindResult(BindOutcome.BOUND, "", 0.0)


class QuietRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[object, ...]] = []

    def event(self, *args: object) -> None:
        self.events.append(args)

    def unschedulable(self, *_: object) -> None:
        pass


def new_scheduler(binder: object = None, recorder: QuietRecorder | None = None) -> Scheduler:
    return Scheduler(
        SchedulerSettings(NAME, batch_size=8),
        default_algorithm(),
        cast(Binder, binder),
        cast(Recorder, recorder or QuietRecorder()),
    )


def test_a_node_deleted_during_a_gap_leaves_the_cache_and_a_newer_one_stays() -> None:
    scheduler = new_scheduler()
    scheduler.on_node(None, at(make_node("gone"), 10))
    scheduler.on_node(None, at(make_node("kept"), 11))
    scheduler.on_node(None, at(make_node("newer"), 30))  # created after the listing at 20
    nodes, pods = scheduler.reconcile(Listing.of({"kept"}, "20"), Listing.of((), "20"))
    assert (nodes, pods) == (["gone"], [])
    assert sorted(scheduler.cache.node_names()) == ["kept", "newer"]
    assert "gone" not in scheduler.cache.snapshot().index


def test_a_pod_deleted_during_a_gap_gives_its_resources_back() -> None:
    scheduler = new_scheduler()
    scheduler.on_node(None, at(make_node("n1", cpu="2"), 5))
    running = at(make_pod("running", NAME, "other", cpu="1500m", node_name="n1"), 6)
    scheduler.on_pod(None, running)
    uid = running["metadata"]["uid"]
    _, pods = scheduler.reconcile(Listing.of({"n1"}, "20"), Listing.of((), "20"))
    assert pods == [uid]
    info = scheduler.cache.node_info("n1")
    assert info is not None and info.requested.milli_cpu == 0 and not info.pods


def test_a_pending_pod_deleted_during_a_gap_leaves_the_queue() -> None:
    scheduler = new_scheduler()
    pending = at(make_pod("pending", NAME, NAME, cpu="100m"), 6)
    scheduler.on_pod(None, pending)
    assert pending["metadata"]["uid"] in scheduler.queue
    scheduler.reconcile(Listing.of((), "20"), Listing.of((), "20"))
    assert pending["metadata"]["uid"] not in scheduler.queue


async def test_a_pod_being_bound_is_never_forgotten_and_is_once_its_bind_is_over() -> None:
    binder, recorder = HeldBinder(), QuietRecorder()
    scheduler = new_scheduler(binder, recorder)
    scheduler.on_node(None, at(make_node("n1", cpu="2"), 5))
    pending = at(make_pod("p", NAME, NAME, cpu="1"), 6)
    uid = pending["metadata"]["uid"]
    scheduler.on_pod(None, pending)
    loop = asyncio.create_task(scheduler.run())
    await wait_for(lambda: scheduler.cache.is_assumed(uid), timeout=10)
    # The listing (taken before the pod was created, say) lacks it: the bind under way wins.
    assert scheduler.reconcile(Listing.of({"n1"}, "20"), Listing.of((), "20")) == ([], [])
    info = scheduler.cache.node_info("n1")
    assert info is not None and info.requested.milli_cpu == 1000
    binder.release.set()
    await wait_for(lambda: recorder.events, timeout=10)  # the Scheduled event: the bind is over
    # Bound, but the pod was deleted before its watch event came: a later listing lets it go.
    assert scheduler.reconcile(Listing.of({"n1"}, "20"), Listing.of((), "20")) == ([], [uid])
    info = scheduler.cache.node_info("n1")
    assert info is not None and info.requested.milli_cpu == 0
    scheduler.queue.close()
    await loop


def test_events_after_a_reconcile_still_apply() -> None:
    scheduler = new_scheduler()
    scheduler.on_node(None, at(make_node("n1"), 5))
    scheduler.reconcile(Listing.of((), "20"), Listing.of((), "20"))
    scheduler.on_node(None, at(make_node("n1"), 25))  # re-created after the listing
    assert scheduler.cache.node_names() == ["n1"]


def pod_group_at(namespace: str, name: str, rv: int) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name, "resourceVersion": str(rv), "generation": 1},
        "spec": {"minMember": 2},
    }


def test_a_podgroup_deleted_during_a_gap_leaves_the_cache_and_a_newer_one_stays() -> None:
    """PodGroups have a watch of their own (app/startup.py): its re-listing drops what vanished."""
    scheduler = new_scheduler()
    for name, rv in (("gone", 10), ("kept", 11), ("newer", 30)):
        scheduler.on_object("PodGroup", None, pod_group_at("ns", name, rv))
    assert scheduler.reconcile_objects("PodGroup", Listing.of({"ns/kept"}, "20")) == ["ns/gone"]
    assert sorted(scheduler.cache.objects_of("PodGroup")) == ["ns/kept", "ns/newer"]
    assert scheduler.gangs.state("ns/gone").group is None


def budget_at(namespace: str, name: str, rv: int) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name, "resourceVersion": str(rv)},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": name}}},
        "status": {"disruptionsAllowed": 0},
    }


def named_at(name: str, rv: int, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(rv)}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta}


@pytest.mark.parametrize(
    ("kind", "make", "kept", "gone"),
    [
        ("Service", lambda name, rv: named_at(name, rv, "ns"), "ns/kept", "ns/gone"),
        ("PersistentVolumeClaim", lambda name, rv: named_at(name, rv, "ns"), "ns/kept", "ns/gone"),
        ("Namespace", named_at, "kept", "gone"),  # cluster-scoped: keyed by name alone
        ("StorageClass", named_at, "kept", "gone"),
    ],
)
def test_every_kind_is_reconciled(kind: str, make: Any, kept: str, gone: str) -> None:
    scheduler = new_scheduler()
    for name, rv in (("gone", 10), ("kept", 11), ("newer", 30)):
        scheduler.on_object(kind, None, make(name, rv))
    assert scheduler.reconcile_objects(kind, Listing.of({kept}, "20")) == [gone]
    assert sorted(scheduler.cache.objects_of(kind)) == sorted([kept, kept.replace("kept", "newer")])
    # The next reconcile finds nothing more to drop: what went is forgotten, versions included.
    assert scheduler.reconcile_objects(kind, Listing.of({kept}, "40")) == [kept.replace("kept", "newer")]


def test_a_budget_deleted_during_a_gap_no_longer_protects_its_pods() -> None:
    scheduler = new_scheduler()
    scheduler.on_object("PodDisruptionBudget", None, budget_at("ns", "gone", 10))
    scheduler.on_object("PodDisruptionBudget", None, budget_at("ns", "kept", 11))
    assert len(scheduler.cache.budgets()) == 2
    assert scheduler.reconcile_objects("PodDisruptionBudget", Listing.of({"ns/kept"}, "20")) == ["ns/gone"]
    assert [budget.name for budget in scheduler.cache.budgets()] == ["kept"]


def member_at(name: str, rv: int, phase: str, label: str = POD_GROUP_LABEL) -> dict[str, Any]:
    pod = make_pod(name, "ns", NAME, labels={label: "g"}, node_name="n1")
    pod["status"] = {"phase": phase}
    return at(pod, rv)


def test_finished_members_deleted_during_a_gap_leave_their_group_and_running_ones_too() -> None:
    """Each watch of finished members reconciles the members of its label; the pod watch those
    that had not finished, whose DELETED a gap hid."""
    scheduler = new_scheduler()
    scheduler.on_node(None, at(make_node("n1"), 1))
    scheduler.on_object("PodGroup", None, pod_group_at("ns", "g", 2))
    pods = {
        "done": member_at("done", 10, "Succeeded"),
        "kept": member_at("kept", 11, "Failed"),
        "old": member_at("old", 12, "Succeeded", LEGACY_POD_GROUP_LABEL),
        "newer": member_at("newer", 30, "Succeeded"),
        "running": member_at("running", 13, "Running"),
    }
    scheduler.on_pod(None, pods["running"])
    for name in ("done", "kept", "old", "newer"):
        scheduler.on_finished_member("ADDED", pods[name])
    uid = {name: raw["metadata"]["uid"] for name, raw in pods.items()}
    listing = Listing.of({uid["kept"]}, "20")
    assert scheduler.reconcile_finished(POD_GROUP_LABEL, listing) == [uid["done"]]
    assert scheduler.reconcile(None, Listing.of((), "20")) == ([], [uid["running"]])
    assert [n for n in pods if scheduler.gangs.tracks(uid[n])] == ["kept", "old", "newer"]
    scheduler.on_finished_member("DELETED", pods["old"])
    assert not scheduler.gangs.tracks(uid["old"])
    status = scheduler.gangs.status("ns/g")
    assert status is not None and (status["succeeded"], status["failed"], status["running"]) == (1, 1, 0)
