"""The pod watch on a real API server: events, resumption after server timeouts, retries.

The re-list after a 410 needs history compacted under a restarted API server: tests/e2e/test_faults.py
(the watch gap) does that."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

from kubesched.kube import informer as informer_module
from kubesched.kube import listing
from kubesched.kube.client import request
from kubesched.kube.informer import Informer
from kubesched.kube.listing import Listing
from kubesched_dev.fixtures import create_pods, make_pod, wait_for


class Seen:
    """What the informer handed over: the last event type per pod name, and the re-listings."""

    def __init__(self) -> None:
        self.last: dict[str, str | None] = {}
        self.listings: list[Listing] = []

    def handle(self, kind: str | None, obj: Mapping[str, Any]) -> None:
        self.last[obj["metadata"]["name"]] = kind

    def relisted(self, listing: Listing) -> None:
        self.listings.append(listing)


@pytest_asyncio.fixture
async def seen_informer(api: ApiClient, namespace: str) -> AsyncIterator[tuple[Seen, Informer]]:
    seen = Seen()
    informer = Informer(
        api, f"/api/v1/namespaces/{namespace}/pods", seen.handle, relisted=seen.relisted, server_timeout=5
    )
    yield seen, informer


async def _run(informer: Informer) -> asyncio.Task[None]:
    return asyncio.create_task(informer.run())


@contextlib.asynccontextmanager
async def watching(informer: Informer) -> AsyncIterator[None]:
    """The informer's run() while the block runs."""
    task = await _run(informer)
    try:
        yield
    finally:
        task.cancel()


async def test_listed_pods_then_their_changes_arrive_and_the_watch_survives_server_timeouts(
    api: ApiClient, namespace: str, seen_informer: tuple[Seen, Informer]
) -> None:
    seen, informer = seen_informer
    await create_pods(api, [make_pod("before", namespace, scheduler_name="nobody")])
    assert await informer.list() == 1 and seen.last == {"before": None}
    async with watching(informer):
        await create_pods(api, [make_pod("after", namespace, scheduler_name="nobody")])
        await wait_for(lambda: seen.last.get("after") == "ADDED", message="ADDED seen")
        status, _ = await request(api, "DELETE", f"/api/v1/namespaces/{namespace}/pods/before")
        assert status < 300
        await wait_for(lambda: seen.last.get("before") == "DELETED", message="DELETED seen")
        # The server ends each watch after 5 s; the next resumes from the last version, no re-list.
        await asyncio.sleep(6)
        await create_pods(api, [make_pod("later", namespace, scheduler_name="nobody")])
        await wait_for(lambda: seen.last.get("later") == "ADDED", message="ADDED after a server timeout")
        assert informer.relists == 0 and seen.listings == []


async def test_a_failing_watch_is_retried_with_backoff_not_given_up(
    seen_informer: tuple[Seen, Informer],
) -> None:
    _, informer = seen_informer
    informer.path = "/api/v1/no-such-collection"
    informer.resource_version = "1"
    informer.max_backoff = 0.05
    task = await _run(informer)
    await wait_for(lambda: informer.failures >= 3, message="three failed attempts")
    assert not task.done()
    task.cancel()


async def test_a_listing_from_the_watch_cache_fetches_on_but_feeds_only_after_what_it_waits_for(
    api: ApiClient, namespace: str, seen_informer: tuple[Seen, Informer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The start-up (app/startup.py) lists pods while nodes are fed, and feeds the pods after them.
    seen, informer = seen_informer
    await create_pods(api, [make_pod(f"p{index}", namespace, scheduler_name="nobody") for index in range(3)])
    fetched = asyncio.Event()

    async def pages(*args: Any, **kwargs: Any) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        async for page in listing.list_pages(*args, **kwargs):
            yield page
        fetched.set()

    monkeypatch.setattr(informer_module, "list_pages", pages)
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    listed = asyncio.create_task(informer.list(after=gate, from_cache=True))
    await asyncio.wait_for(fetched.wait(), 30)
    assert seen.last == {} and not listed.done(), "fed before the gate opened"
    gate.set_result(None)
    # Served by the watch cache, which may be a moment behind the pods just created: this listing
    # may miss some, and the watch started from its resourceVersion delivers them.
    assert await listed == len(seen.last) and set(seen.last) <= {"p0", "p1", "p2"}
    async with watching(informer):
        await wait_for(lambda: set(seen.last) == {"p0", "p1", "p2"}, message="every pod, listed or watched")


async def test_what_may_wait_is_fed_by_the_watch_before_any_event_it_delivers(
    api: ApiClient, namespace: str, seen_informer: tuple[Seen, Informer]
) -> None:
    # The start-up queues plain pending pods after scheduling starts (app/startup.py's may_wait):
    # the listing leaves them to run(), which hands them over before its watch can overtake them.
    seen, informer = seen_informer
    order: list[tuple[str, str | None]] = []

    def handle(kind: str | None, obj: Mapping[str, Any]) -> None:
        seen.handle(kind, obj)
        order.append((obj["metadata"]["name"], kind))

    informer.handle = handle
    await create_pods(api, [make_pod(name, namespace, scheduler_name="nobody") for name in ("now", "wait")])
    assert await informer.list(later=lambda pod: pod["metadata"]["name"] == "wait") == 2
    assert order == [("now", None)] and not informer.fed.is_set()
    status, _ = await request(api, "DELETE", f"/api/v1/namespaces/{namespace}/pods/wait")
    assert status < 300
    async with watching(informer):
        await wait_for(lambda: seen.last.get("wait") == "DELETED", message="the deletion watched")
        assert order[:2] == [("now", None), ("wait", None)] and informer.fed.is_set(), order


async def test_a_listing_with_nothing_left_to_wait_is_fed_at_once(
    api: ApiClient, namespace: str, seen_informer: tuple[Seen, Informer]
) -> None:
    seen, informer = seen_informer
    await create_pods(api, [make_pod("only", namespace, scheduler_name="nobody")])
    assert await informer.list(later=lambda pod: False) == 1
    assert seen.last == {"only": None} and informer.fed.is_set()


async def test_held_it_feeds_a_first_slice_of_what_waits_and_the_rest_once_released(
    api: ApiClient, namespace: str, seen_informer: tuple[Seen, Informer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The start-up's first cycle takes the first pending pods alone; the rest follow its binds (app/run.py).
    monkeypatch.setattr(informer_module, "SLICE", 2)
    seen, informer = seen_informer
    names = [f"p{index}" for index in range(5)]
    await create_pods(api, [make_pod(name, namespace, scheduler_name="nobody") for name in names])
    assert await informer.list(later=lambda pod: True) == 5
    assert seen.last == {}
    release = asyncio.Event()
    task = asyncio.create_task(informer.run(hold=release.wait))
    try:
        await wait_for(lambda: len(seen.last) == 2, message="the first slice fed")
        await asyncio.sleep(0.2)  # given the chance, it feeds nothing more while held
        assert len(seen.last) == 2 and not informer.fed.is_set(), seen.last
        release.set()
        await wait_for(lambda: informer.fed.is_set() and set(seen.last) == set(names), message="the rest fed")
    finally:
        task.cancel()
