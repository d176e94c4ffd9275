"""The watches of every kind the scheduler reads, and the initial listing that fills the cache
before the first scheduling cycle: scheduling before every bound pod is known would overcommit
nodes. Each kind is listed by its own watch (kube/informer.py), which then watches from that listing.

Scheduling starts once every node, every bound pod, every nominated pod and every gang member is
in; the other pending pods are queued while the first cycles run (`may_wait`), before the pod
watch starts. Feeding ten thousand of them would otherwise hold the first bind back. kube-scheduler
1.20 does no stricter: its WaitForCacheSync returns once the informers have popped their listings,
while its event handlers may still be adding the pending pods to the queue.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from kubesched.kube.client import Api
from kubesched.kube.informer import Informer
from kubesched.kube.listing import list_all, name_of, object_key
from kubesched.model.kinds import FINISHED_MEMBERS, NODES, PODS, WATCHED_OBJECTS, WatchedKind
from kubesched.model.podgroup import LEGACY_POD_GROUP_LABEL, POD_GROUP_LABEL
from kubesched.runtime.scheduler import Scheduler

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Watches:
    """One informer for each kind the scheduler reads: nodes, pods, and those of model/kinds.py."""

    nodes: Informer
    pods: Informer
    objects: tuple[Informer, ...]
    finished_members: tuple[Informer, ...]  # PodGroup members that finished, for their groups' status

    @property
    def every(self) -> tuple[Informer, ...]:
        return (self.nodes, self.pods, *self.objects, *self.finished_members)


def watches_for(api: Api, scheduler: Scheduler, kinds: Sequence[WatchedKind] = WATCHED_OBJECTS) -> Watches:
    """The informers feeding `scheduler`, one per kind of `kinds` (its first version listed, when
    the server serves several: one object seen through two versions is one object)."""
    nodes = Informer(
        api,
        NODES.path,
        scheduler.on_node,
        relisted=lambda listing: scheduler.reconcile(listing, None),
        key=name_of,
        query=NODES.query,
        lean=True,
    )
    pods = Informer(
        api,
        PODS.path,
        scheduler.on_pod,
        relisted=lambda listing: scheduler.reconcile(None, listing),
        query=PODS.query,
        lean=True,
    )
    first_version: dict[str, WatchedKind] = {}
    for watched in kinds:
        first_version.setdefault(watched.kind, watched)
    objects = tuple(
        Informer(
            api,
            watched.path,
            functools.partial(scheduler.on_object, watched.kind),
            relisted=functools.partial(scheduler.reconcile_objects, watched.kind),
            key=object_key,
            query=watched.query,
        )
        for watched in first_version.values()
    )
    finished_members = tuple(
        Informer(
            api,
            watched.path,
            scheduler.on_finished_member,
            relisted=functools.partial(scheduler.reconcile_finished, label),
            query=watched.query,
            lean=True,
        )
        for label, watched in FINISHED_MEMBERS.items()
    )
    return Watches(nodes, pods, objects, finished_members)


async def initial_sync(watches: Watches) -> dict[str, int]:
    """Fill the cache through every watch's listing; each watch then starts from its own. Returns
    how many objects each collection listed.

    Every collection is listed at once, so the first cycle waits for the slowest listing rather
    than for their sum; the event loop still feeds one page at a time. Pods are fed last, so that a
    bound pod lands on a known node rather than in the orphan list, and a gang member finds its
    PodGroup; their pages are fetched meanwhile."""
    listed = {watches.nodes: asyncio.ensure_future(watches.nodes.list(from_cache=True))}
    listed.update({watch: asyncio.ensure_future(watch.list(from_cache=True)) for watch in watches.objects})
    before_pods = asyncio.gather(*listed.values())
    listed[watches.pods] = asyncio.ensure_future(
        watches.pods.list(after=before_pods, from_cache=True, later=may_wait)
    )
    # Finished members only count in their groups' status: they hold no pod back.
    members = [
        asyncio.ensure_future(watch.list(after=before_pods, from_cache=True))
        for watch in watches.finished_members
    ]
    try:
        await asyncio.gather(*listed.values(), *members)
    finally:
        for listing in (*listed.values(), *members):  # one failed: the others stop too
            listing.cancel()
    counts = {watch.path.rpartition("/")[2]: listing.result() for watch, listing in listed.items()}
    counts["finished_members"] = sum(listing.result() for listing in members)
    log.info("cache_synced", **counts)
    return counts


def may_wait(pod: Mapping[str, Any]) -> bool:
    """Whether a listed pod may be queued after scheduling starts: pending, with no nomination
    (which holds room on its node), not terminating, in no PodGroup (whose members are counted
    against minMember). Such a pod changes no decision but its own."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return not (
        spec.get("nodeName")
        or (pod.get("status") or {}).get("nominatedNodeName")
        or meta.get("deletionTimestamp")
        or POD_GROUP_LABEL in labels
        or LEGACY_POD_GROUP_LABEL in labels
    )


async def sync_bound_pods(api: Api, scheduler: Scheduler) -> int:
    """Before a new leader schedules: bound pods that the watch has not delivered yet (the last
    leader's final binds). Only what the cache lacks is added: a listing may be older than events
    that overtook it, and must not undo them. Returns how many were added."""
    pods = await list_all(api, PODS.path, fieldSelector=f"{PODS.field_selector},spec.nodeName!=")
    added = 0
    for pod in pods:
        uid = (pod.get("metadata") or {}).get("uid")
        if uid and not scheduler.cache.has_pod(uid):
            scheduler.on_pod(None, pod)
            added += 1
    log.info("leader_caught_up", bound_pods=len(pods), added=added)
    return added


async def keep_reconciling(watches: Watches, interval: float) -> None:
    """Reconcile every watch's kind with a fresh listing every `interval` seconds (never when it is
    0), for as long as the process runs: see kube/listing.py."""
    while interval > 0:
        await asyncio.sleep(interval)
        for watch in watches.every:
            try:
                await watch.reconcile()
            except Exception as exc:  # the API server may be down: the next round tries again
                log.warning("cache_reconcile_failed", path=watch.path, error=repr(exc))
