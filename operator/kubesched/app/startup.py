"""The initial listing that fills the cache before the first scheduling cycle.

Kopf's watches list too, but give no signal when their listing is complete; scheduling before
every bound pod is known would overcommit nodes. So the cache is filled from our own paginated
LISTs first; Kopf's later events for the same objects are idempotent updates. Nodes and pods are
listed by their own watches (informer.py), which then watch from those listings.

Scheduling starts once every node, every bound pod, every nominated pod and every gang member is
in; the other pending pods are queued while the first cycles run (`may_wait`), before the pod
watch starts. Feeding ten thousand of them would otherwise hold the first bind back. kube-scheduler
1.20 does no stricter: its WaitForCacheSync returns once the informers have popped their listings,
while its event handlers may still be adding the pending pods to the queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from kubesched.kube.client import Api
from kubesched.kube.early_listing import EarlyListings
from kubesched.kube.informer import Informer
from kubesched.kube.listing import (
    Listing,
    NotServed,
    feed_page,
    list_all,
    list_pages,
    list_versioned,
    name_of,
    uid_of,
)
from kubesched.model.kinds import NODES, PODS, WATCHED_OBJECTS, WatchedKind
from kubesched.model.podgroup import LEGACY_POD_GROUP_LABEL, POD_GROUP_LABEL
from kubesched.runtime.scheduler import Scheduler

log = structlog.get_logger(__name__)


async def initial_sync(
    api: Api,
    scheduler: Scheduler,
    nodes: Informer,
    pods: Informer,
    kinds: Sequence[WatchedKind] = WATCHED_OBJECTS,
    early: EarlyListings | None = None,
) -> dict[str, int]:
    """Fill the cache: the objects of `kinds` the plugins read, then nodes and pods through their
    watches' listings. Returns how many objects of each resource were listed.

    Every collection is listed at once, so the first cycle waits for the slowest listing rather
    than for their sum; the event loop still feeds one page at a time. `early`: the node and pod
    listings' first requests, if `kubesched run` sent them before its imports."""
    nodes_listed = asyncio.ensure_future(nodes.list(from_cache=True, early=early))
    # Nodes before pods, so bound pods land on known nodes rather than in the orphan list: the pods'
    # pages are fetched meanwhile and fed after. Each watch starts from its listing.
    pods_listed = asyncio.ensure_future(
        pods.list(after=nodes_listed, from_cache=True, early=early, later=may_wait)
    )
    kinds_listed = [asyncio.ensure_future(_list_kind(api, scheduler, watched)) for watched in kinds]
    listings = [nodes_listed, pods_listed, *kinds_listed]
    try:
        await asyncio.gather(*listings)
    finally:
        for listing in listings:  # one failed: the others stop too
            listing.cancel()
    counts: dict[str, int] = {}
    for watched, listed in zip(kinds, kinds_listed, strict=True):
        # A kind served in two versions lists the same objects twice.
        counts[watched.plural] = max(counts.get(watched.plural, 0), listed.result())
    counts[NODES.plural] = nodes_listed.result()
    counts[PODS.plural] = pods_listed.result()
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


async def _list_kind(api: Api, scheduler: Scheduler, watched: WatchedKind) -> int:
    """Feed the objects of one kind to the cache; how many (0 when the server does not serve it)."""
    handle = _object_handler(scheduler, watched.kind)
    listed = 0
    try:
        async for page, _ in list_pages(api, watched.path, query=watched.query, from_cache=True):
            await feed_page(page, handle)
            listed += len(page)
    except NotServed:
        log.info("api_not_served", path=watched.path)
    return listed


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


async def reconcile_cache(api: Api, scheduler: Scheduler) -> tuple[list[str], list[str]]:
    """Drop from the cache the nodes and pods a fresh listing no longer has (see kube/listing.py)."""
    nodes, nodes_rv = await list_versioned(api, NODES.path, **NODES.query)
    pods, pods_rv = await list_versioned(api, PODS.path, **PODS.query)
    return scheduler.reconcile(
        Listing.of(map(name_of, nodes), nodes_rv),
        Listing.of(map(uid_of, pods), pods_rv),
    )


async def keep_reconciling(api: Api, scheduler: Scheduler, interval: float) -> None:
    """Reconcile the cache every `interval` seconds (never when it is 0), for as long as the process runs."""
    while interval > 0:
        await asyncio.sleep(interval)
        try:
            await reconcile_cache(api, scheduler)
        except Exception as exc:  # the API server may be down: the next round tries again
            log.warning("cache_reconcile_failed", error=repr(exc))


def _object_handler(scheduler: Scheduler, kind: str) -> Callable[[dict[str, Any]], None]:
    return lambda obj: scheduler.on_object(kind, None, obj)
