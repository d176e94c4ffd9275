"""The watches of every kind the scheduler reads: a list, then a watch from the listing's
resourceVersion, fed straight to the scheduler, as client-go's informers do for kube-scheduler.

Pods and nodes are the busy streams: every pod is seen pending, then bound, then on each status
change; nodes report status. Kopf would give each object a task and a queue of its own and run
every event through its handler machinery, which dominated the event loop under load. Here an
event costs one JSON parse (nodes and pods without managedFields, as listed) and the scheduler's
own handling. The other kinds the plugins read (model/kinds.py) go the same way, so that every
kind gets the same re-list and reconcile; only SchedulerPolicies, the operator's own resources,
stay with Kopf.

The watch resumes from the last resourceVersion it saw after a disconnect or a server timeout.
When that version has been compacted away (`410 Gone`) it lists again, replays the listing and
drops from the cache what the listing lacks: a gap sends no DELETED for what vanished in it.
`reconcile` does the same against a fresh listing, now and then (app/startup.py), in case a gap
went unnoticed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
import structlog

from kubesched.kube.client import Api
from kubesched.kube.listing import (
    SLICE,
    Listing,
    NotServed,
    decode_watch_event,
    feed_page,
    list_pages,
    list_versioned,
    uid_of,
)
from kubesched.kube.retry import backoff_delay

log = structlog.get_logger(__name__)

Handler = Callable[[str | None, Mapping[str, Any]], None]
Pages = list[list[dict[str, Any]]]  # named here: inside Informer, `list` is its method
Picker = Callable[[Mapping[str, Any]], bool]


class Expired(Exception):
    """The watch's resourceVersion is too old (`410 Gone`): list again."""


class Informer:
    def __init__(
        self,
        api: Api,
        path: str,
        handle: Handler,
        *,
        relisted: Callable[[Listing], object] | None = None,
        key: Callable[[Mapping[str, Any]], str] = uid_of,
        query: Mapping[str, str] | None = None,
        lean: bool = False,
        server_timeout: int = 300,
        max_backoff: float = 10.0,
    ) -> None:
        self.api = api
        self.path = path
        self.handle = handle
        self.relisted = relisted  # told the keys of each re-listing, to drop what it lacks
        self.key = key
        self.query = dict(query or {})
        self.lean = lean  # nodes and pods: listed and watched without managedFields (kube/listing.py)
        self.server_timeout = server_timeout
        self.max_backoff = max_backoff
        self.resource_version = ""
        self.events = 0
        self.relists = 0
        self.failures = 0
        self._later: Pages = []  # the start-up listing's objects left for run() to feed
        self.fed = asyncio.Event()  # every object of the first listing handed over
        self.served = True  # False once the server answered 404: nothing to watch

    async def list(
        self,
        after: asyncio.Future[Any] | None = None,
        *,
        from_cache: bool = False,
        later: Picker | None = None,
    ) -> int:
        """Feed every object, a page at a time; the watch starts from this listing. Returns how many.

        `after`: feed nothing before it is done, while fetching on (the start-up lists pods while
        nodes are fed, and feeds them after: a bound pod then lands on a known node).
        `from_cache`: from the watch cache (listing.list_pages): the start-up's listing, never a
        re-listing after a 410, which must not go back in time; `later`: which objects may wait, fed by run()
        before its watch starts, so that no event overtakes them (the start-up's pending pods that
        no decision depends on: app/startup.py)."""
        count = 0
        keys: set[str] = set()
        version = ""
        held: Pages = []
        try:
            async for page, page_version in list_pages(
                self.api, self.path, query=self.query, from_cache=from_cache, lean=self.lean
            ):
                version = version or page_version
                keys.update(map(self.key, page))
                count += len(page)
                held.append(page)
                if after is None or after.done():
                    await self._feed_pages(held, later)
        except NotServed:
            log.info("api_not_served", path=self.path)
            self.served = False
            self.fed.set()
            return 0
        if after is not None:
            await after
        await self._feed_pages(held, later)
        if not any(self._later):
            self.fed.set()
        self.resource_version = version
        if self.relists and self.relisted is not None:
            self.relisted(Listing.of(keys, version))
        return count

    async def _feed_pages(self, pages: Pages, later: Picker | None = None) -> None:
        """Feed and forget `pages`, oldest first; what `later` picks is kept for run()."""
        while pages:
            page = pages.pop(0)
            if later is not None:
                now: list[dict[str, Any]] = []
                wait: list[dict[str, Any]] = []
                for obj in page:
                    (wait if later(obj) else now).append(obj)
                self._later.append(wait)
                page = now
            await feed_page(page, lambda obj: self._feed(None, obj))

    async def run(self, hold: Callable[[], Awaitable[object]] | None = None) -> None:
        """Watch until cancelled: resume after disconnects, list again after a 410, back off on errors.

        `hold`: fed the first slice of what the listing left for later, wait for it before feeding
        the rest (the start-up's first cycle then has the GIL to itself: app/run.py)."""
        if hold is not None and self._later:
            first = self._later[0]
            await feed_page(first[:SLICE], lambda obj: self._feed(None, obj))
            self._later[0] = first[SLICE:]
            await hold()
        await self._feed_pages(self._later)
        self.fed.set()
        failures = 0
        while self.served:
            try:
                if not self.resource_version:
                    self.relists += 1
                    await self.list()
                await self._watch()
                failures = 0
            except Expired:
                log.info("watch_expired", path=self.path, resource_version=self.resource_version)
                self.resource_version = ""
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the API server may be away: never give up on the pods
                failures += 1
                self.failures += 1
                delay = backoff_delay(failures, 0.2, self.max_backoff, jitter=-0.5)
                log.warning("watch_failed", path=self.path, error=repr(exc), retry_in=round(delay, 2))
                await asyncio.sleep(delay)

    async def reconcile(self) -> Listing | None:
        """Hand `relisted` the keys of a fresh, consistent listing (not the watch cache's), so that
        what vanished unseen is dropped; None when there is nothing to reconcile."""
        if not self.served or self.relisted is None:
            return None
        objects, version = await list_versioned(self.api, self.path, **self.query)
        listing = Listing.of(map(self.key, objects), version)
        self.relisted(listing)
        return listing

    async def _watch(self) -> None:
        params = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.resource_version),
            ("timeoutSeconds", str(self.server_timeout)),
            *self.query.items(),
        ]
        response = await self.api.call_api(
            self.path,
            "GET",
            query_params=params,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=self.server_timeout + 30, sock_connect=10),
        )
        try:
            if response.status == 410:
                raise Expired()
            if response.status >= 300:
                raise RuntimeError(f"watching {self.path}: {response.status} {await response.text()}")
            handled = 0
            async for line in response.content:
                if line.strip():
                    self._event(decode_watch_event(line, lean=self.lean))
                    handled += 1
                    if handled % SLICE == 0:
                        # Reading buffered lines never suspends: a backlog would hold the loop.
                        await asyncio.sleep(0)
        finally:
            response.release()

    def _event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Expired()
            raise RuntimeError(f"watching {self.path}: {obj.get('code')} {obj.get('message')}")
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.resource_version = str(version)
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._feed(kind, obj)

    def _feed(self, kind: str | None, obj: Mapping[str, Any]) -> None:
        self.events += 1
        try:
            self.handle(kind, obj)
        except Exception:  # one bad object must not stop the stream for every other pod
            meta = obj.get("metadata") or {}
            log.exception("watch_event_failed", path=self.path, name=meta.get("name"), type=kind)
