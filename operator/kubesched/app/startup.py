"""The initial listing that fills the cache before the first scheduling cycle.

Kopf's watches list too, but give no signal when their listing is complete; scheduling before
every bound pod is known would overcommit nodes. So the cache is filled from our own paginated
LISTs first; Kopf's later events for the same objects are idempotent updates. Nodes and pods are
listed by their own watches (informer.py), which then watch from those listings.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import structlog
from kubernetes_asyncio import client

from kubesched.app.handlers import NON_TERMINAL_PODS, WATCHED_OBJECTS
from kubesched.kube.client import LIST_PAGE, request
from kubesched.kube.listing import Listing, name_of, uid_of
from kubesched.runtime.scheduler import Scheduler

if TYPE_CHECKING:
    from kubesched.kube.informer import Informer

log = structlog.get_logger(__name__)
SLICE = 100  # objects handled between yields to the event loop: 500 nodes at once stalled it 59 ms


async def list_all(api: client.ApiClient, path: str, **query: str) -> list[dict[str, Any]]:
    """Every object at a collection path, page by page."""
    return (await list_versioned(api, path, **query))[0]


async def list_versioned(api: client.ApiClient, path: str, **query: str) -> tuple[list[dict[str, Any]], str]:
    """Every object at a collection path and the resourceVersion of the listing (its first page:
    later pages are served from the same snapshot)."""
    items: list[dict[str, Any]] = []
    version = ""
    async for page, page_version in list_pages(api, path, **query):
        items.extend(page)
        version = version or page_version
    return items, version


async def list_pages(
    api: client.ApiClient, path: str, **query: str
) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
    """The objects at a collection path a page at a time, each with the listing's resourceVersion:
    a caller that handles each page as it comes holds one page, not the whole listing."""
    token = ""
    first = True
    while True:
        params: list[tuple[str, Any]] = [("limit", LIST_PAGE), *query.items()]
        if token:
            params.append(("continue", token))
        status, body = await request(api, "GET", path, query=params, timeout=60)
        if status == 404 and first:
            raise NotServed(f"{path} is not served by this API server")
        if status >= 300:
            raise RuntimeError(f"listing {path} failed: {status} {body}")
        first = False
        meta = body.get("metadata") or {}
        yield body.get("items") or [], str(meta.get("resourceVersion") or "")
        token = meta.get("continue") or ""
        if not token:
            return


async def feed_page(page: list[dict[str, Any]], handle: Callable[[dict[str, Any]], None]) -> None:
    """Hand each object of a page to `handle`, letting the event loop run between slices."""
    for start in range(0, len(page), SLICE):
        for obj in page[start : start + SLICE]:
            handle(obj)
        await asyncio.sleep(0)


class NotServed(RuntimeError):
    """The API server does not serve this resource (e.g. policy/v1 on Kubernetes 1.20)."""


def collection_path(group: str, version: str, plural: str) -> str:
    return f"/api/{version}/{plural}" if not group else f"/apis/{group}/{version}/{plural}"


async def initial_sync(
    api: client.ApiClient, scheduler: Scheduler, nodes: Informer, pods: Informer
) -> dict[str, int]:
    counts: dict[str, int] = {}

    async def feed(path: str, handle: Callable[[dict[str, Any]], None], name: str, **query: str) -> None:
        counts[name] = 0
        async for page, _ in list_pages(api, path, **query):
            await feed_page(page, handle)
            counts[name] += len(page)

    for group, version, plural, kind in WATCHED_OBJECTS:
        path = collection_path(group, version, plural)
        try:
            await feed(path, _object_handler(scheduler, kind), plural)
        except NotServed:
            log.info("api_not_served", path=path)
    # Nodes before pods, so bound pods land on known nodes rather than in the orphan list. Each
    # watch starts from its listing.
    counts["nodes"] = await nodes.list()
    counts["pods"] = await pods.list()
    log.info("cache_synced", **counts)
    return counts


async def sync_bound_pods(api: client.ApiClient, scheduler: Scheduler) -> int:
    """Before a new leader schedules: bound pods that the watch has not delivered yet (the last
    leader's final binds). Only what the cache lacks is added: a listing may be older than events
    that overtook it, and must not undo them. Returns how many were added."""
    query = {"fieldSelector": f"{NON_TERMINAL_PODS},spec.nodeName!="}
    pods = await list_all(api, "/api/v1/pods", **query)
    added = 0
    for pod in pods:
        uid = (pod.get("metadata") or {}).get("uid")
        if uid and not scheduler.cache.has_pod(uid):
            scheduler.on_pod(None, pod)
            added += 1
    log.info("leader_caught_up", bound_pods=len(pods), added=added)
    return added


async def reconcile_cache(api: client.ApiClient, scheduler: Scheduler) -> tuple[list[str], list[str]]:
    """Drop from the cache the nodes and pods a fresh listing no longer has (see reconcile.py)."""
    nodes, nodes_rv = await list_versioned(api, "/api/v1/nodes")
    pods, pods_rv = await list_versioned(api, "/api/v1/pods", fieldSelector=NON_TERMINAL_PODS)
    return scheduler.reconcile(
        Listing.of(map(name_of, nodes), nodes_rv),
        Listing.of(map(uid_of, pods), pods_rv),
    )


async def keep_reconciling(api: client.ApiClient, scheduler: Scheduler, interval: float) -> None:
    """Reconcile the cache every `interval` seconds (never when it is 0), for as long as the process runs."""
    while interval > 0:
        await asyncio.sleep(interval)
        try:
            await reconcile_cache(api, scheduler)
        except Exception as exc:  # the API server may be down: the next round tries again
            log.warning("cache_reconcile_failed", error=repr(exc))


def _object_handler(scheduler: Scheduler, kind: str) -> Callable[[dict[str, Any]], None]:
    return lambda obj: scheduler.on_object(kind, None, obj)
