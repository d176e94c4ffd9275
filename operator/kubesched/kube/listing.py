"""Listing a collection, and reconciling the cache with a fresh listing: what a watch gap left behind.

A LIST comes in pages (`limit`, `continue`), all served from the snapshot of the first page's
resourceVersion; each page is handed on in slices, so that a large cluster never holds the event
loop for long. Every kind the scheduler reads is listed by its own watch (informer.py); the
SchedulerPolicies by the policy controller, everything by `kubesched snapshot`.

When a watch breaks for longer than etcd keeps history (`410 Gone`), a re-list replays what
exists, but no DELETED comes for objects that vanished during the gap: a deleted node would keep
being chosen, a deleted pod would keep its resources, a deleted PDB would keep protecting its
pods. So each re-listing, and now and then a fresh one, is compared with the cache.

A listing is a consistent picture at its `resourceVersion`; watch events that overtook it are
newer. An object the cache holds but the listing lacks is stale only if the cache's copy is not
newer than the listing (it may have been created after it): resource versions are etcd
revisions, compared as integers; one that does not parse as one is never called stale.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypedDict

import msgspec
import structlog

from kubesched.kube.client import Api, request

log = structlog.get_logger(__name__)

SLICE: Final = 100  # objects handled between yields to the event loop: hundreds of nodes at once stall it
# Objects per listing request, ours and Kopf's. Each page is parsed in one piece, and the garbage
# collector runs inside the parse: the page size bounds how long the loop stalls.
LIST_PAGE: Final = 100

Query = tuple[tuple[str, str], ...]


class ObjectMeta(TypedDict, total=False):
    """An object's metadata as listed, every field but managedFields (Kubernetes 1.20 to 1.32):
    decoding into it skips that one field and keeps the others as plain dicts."""

    name: Any
    generateName: Any
    namespace: Any
    selfLink: Any
    uid: Any
    resourceVersion: Any
    generation: Any
    creationTimestamp: Any
    deletionTimestamp: Any
    deletionGracePeriodSeconds: Any
    labels: Any
    annotations: Any
    ownerReferences: Any
    finalizers: Any
    clusterName: Any  # until 1.24


class Item(TypedDict, total=False):
    """A listed node or pod: every top-level field they have (other kinds have more: their
    listings are decoded whole)."""

    apiVersion: Any
    kind: Any
    metadata: ObjectMeta
    spec: Any
    status: Any


class ListReply(TypedDict, total=False):
    """A successful LIST's body; a failure's (a Status) is decoded whole."""

    apiVersion: Any
    kind: Any
    metadata: Any
    items: list[Item]


class WatchEvent(TypedDict, total=False):
    """A watch event on nodes or pods: its object decoded as a listed one (Item)."""

    type: Any
    object: Item


_LEAN_LISTING: Final = msgspec.json.Decoder(ListReply)
_LEAN_EVENT: Final = msgspec.json.Decoder(WatchEvent)
_WHOLE: Final = msgspec.json.Decoder()


class NotServed(RuntimeError):
    """The API server does not serve this resource (e.g. policy/v1 on Kubernetes 1.20)."""


async def list_all(api: Api, path: str, **query: str) -> list[dict[str, Any]]:
    """Every object at a collection path, page by page."""
    return (await list_versioned(api, path, **query))[0]


async def list_versioned(api: Api, path: str, **query: str) -> tuple[list[dict[str, Any]], str]:
    """Every object at a collection path and the resourceVersion of the listing (its first page:
    later pages are served from the same snapshot)."""
    items: list[dict[str, Any]] = []
    version = ""
    async for page, page_version in list_pages(api, path, query=query):
        items.extend(page)
        version = version or page_version
    return items, version


async def list_pages(
    api: Api,
    path: str,
    *,
    query: Mapping[str, str] | None = None,
    from_cache: bool = False,
    lean: bool = False,
) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
    """The objects at a collection path a page at a time, each with the listing's resourceVersion:
    a caller that handles each page as it comes holds one page, not the whole listing.

    `from_cache`: served from the API server's watch cache (`resourceVersion=0`), as client-go's
    informers list at start-up: no etcd read, at the price of a listing that may be a moment old
    (the watch that follows it catches up). Kubernetes 1.20 serves it in one piece, whatever the
    limit. `lean`: nodes and pods, decoded without their managedFields (decode_listing)."""
    token = ""
    first = True
    while True:
        params = listing_query(query, from_cache=from_cache, token=token, page=LIST_PAGE)
        decode = functools.partial(decode_listing, 200) if lean else None
        status, body = await request(api, "GET", path, query=params, timeout=60, decode=decode)
        if status == 404 and first:
            raise NotServed(f"{path} is not served by this API server")
        if status >= 300:
            raise RuntimeError(f"listing {path} failed: {status} {body}")
        first = False
        meta = body.get("metadata") or {}
        items = body.get("items") or []
        if from_cache:
            # The watch cache lists in no particular order; etcd in key order (`.../ns/name`, byte
            # by byte, as namespaced_name_of spells it). The cache's node order decides ties and the
            # search's rotation, so that `simulate` on a saved snapshot and a restarted scheduler
            # place pods alike, it is etcd's.
            items.sort(key=namespaced_name_of)
        yield items, str(meta.get("resourceVersion") or "")
        token = meta.get("continue") or ""
        if not token:
            return


def decode_listing(status: int, body: bytes | str) -> Any:
    """A node or pod listing as `json.loads` would build it, less each object's managedFields: the
    server's record of who wrote which field, which no scheduler reads, and at 5,000 nodes nearly
    half the bytes; msgspec skips it in about a third of the time it takes to build it."""
    if not body:
        return None
    return (_LEAN_LISTING if 200 <= status < 300 else _WHOLE).decode(body)


def decode_watch_event(line: bytes, *, lean: bool) -> Any:
    """One line of a watch, as `json.loads` would build it; a node's or pod's (`lean`) without its
    managedFields, decoded as their listings are. An ERROR's object is a Status, decoded whole: its
    code says whether to list again."""
    if lean:
        event = _LEAN_EVENT.decode(line)
        if event.get("type") != "ERROR":
            return event
    return _WHOLE.decode(line)


def listing_query(
    query: Mapping[str, str] | None, *, from_cache: bool, token: str = "", page: int = LIST_PAGE
) -> Query:
    """The query of one request of a listing (kube/listing.list_pages): `page` objects, `query`,
    from the watch cache or not, continuing from `token`."""
    params = [("limit", str(page)), *(query or {}).items()]
    if from_cache:
        params.append(("resourceVersion", "0"))
    if token:
        params.append(("continue", token))
    return tuple(params)


async def feed_page(page: list[dict[str, Any]], handle: Callable[[dict[str, Any]], None]) -> None:
    """Hand each object of a page to `handle`, letting the event loop run between slices."""
    for start in range(0, len(page), SLICE):
        for obj in page[start : start + SLICE]:
            handle(obj)
        await asyncio.sleep(0)


@dataclass(frozen=True, slots=True)
class Listing:
    """The keys (node names, pod uids) a LIST returned, and the resourceVersion it was served at."""

    keys: frozenset[str]
    resource_version: str

    @classmethod
    def of(cls, keys: Iterable[str], resource_version: str) -> Listing:
        return cls(frozenset(keys), resource_version)


def uid_of(obj: Mapping[str, Any]) -> str:
    """A pod's key in a listing."""
    return str((obj.get("metadata") or {}).get("uid") or "")


def name_of(obj: Mapping[str, Any]) -> str:
    """A node's key in a listing."""
    return str((obj.get("metadata") or {}).get("name") or "")


def object_key(obj: Mapping[str, Any]) -> str:
    """A cached object's key: `namespace/name`, or `name` for a cluster-scoped one."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name') or ''}" if namespace else str(meta.get("name") or "")


def namespaced_name_of(obj: Mapping[str, Any]) -> str:
    """A namespaced object's key in a listing: `namespace/name`."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def version(rv: str) -> int | None:
    """A resourceVersion as an etcd revision, or None when it is not one."""
    try:
        value = int(rv)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def not_newer(rv: str, listing: Listing) -> bool:
    """Whether an object last seen at `rv` predates (or equals) the listing."""
    seen, listed = version(rv), version(listing.resource_version)
    return seen is not None and listed is not None and seen <= listed


def stale(cached: Mapping[str, str], listing: Listing, keep: Collection[str] = ()) -> list[str]:
    """The keys of `cached` (key -> last seen resourceVersion) that vanished before the listing.

    `keep`: keys never to drop whatever the listing says (pods assumed and being bound).
    """
    return sorted(
        key
        for key, rv in cached.items()
        if key not in listing.keys and key not in keep and not_newer(rv, listing)
    )
