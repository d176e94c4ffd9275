"""Watching the bench namespace from the harness: when each pod is first seen with a nodeName."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from kubebench.kubeapi import ApiError, list_items, watch_events


class BindWatcher:
    """Records, for every pod of one namespace (""; all), the first time (monotonic) it carried a nodeName.

    The times are when the harness saw the change: bind time plus the watch's delivery delay,
    the same small delay for every scheduler.
    """

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.bound: dict[str, tuple[float, str]] = {}  # pod -> (time first seen bound, node)
        self.rebound: dict[str, list[str]] = {}  # pods seen on a second node
        self.pods: set[str] = set()
        self.restarts = 0
        self._task: asyncio.Task[None] | None = None
        self._listed = asyncio.Event()

    @property
    def bound_count(self) -> int:
        return len(self.bound)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"watch-{self.namespace}")
        listed = asyncio.create_task(self._listed.wait())
        done, _ = await asyncio.wait({listed, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:
            listed.cancel()
            self._task.result()  # raises what stopped it

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            # wait(), not await: a cancellation of our caller must not be swallowed here.
            await asyncio.wait([self._task])

    def failed(self) -> BaseException | None:
        """What ended the watch, if it ended by itself."""
        if self._task is None or not self._task.done() or self._task.cancelled():
            return None
        return self._task.exception()

    def _see(self, pod: dict[str, Any], now: float) -> None:
        name = pod["metadata"]["name"]
        self.pods.add(name)
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return
        first = self.bound.get(name)
        if first is None:
            self.bound[name] = (now, node)
        elif first[1] != node:
            self.rebound.setdefault(name, [first[1]]).append(node)

    async def _run(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods" if self.namespace else "/api/v1/pods"
        while True:
            pods, version = await list_items(self.api, path)
            now = time.monotonic()
            for pod in pods:
                self._see(pod, now)
            self._listed.set()
            try:
                while True:
                    async for event in watch_events(self.api, path, version, timeout_seconds=600):
                        kind, obj = event.get("type"), event.get("object") or {}
                        if kind == "ERROR":
                            raise ApiError("watch", int(obj.get("code") or 0), obj.get("message"))
                        version = obj.get("metadata", {}).get("resourceVersion") or version
                        if kind in ("ADDED", "MODIFIED"):
                            self._see(obj, time.monotonic())
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError, ValueError):
                # Expired or broken: re-list. Pods bound meanwhile get the re-list's time (late,
                # never early); `restarts` in the results says whether that happened.
                self.restarts += 1
                await asyncio.sleep(0.1)


async def scheduled_events(api: client.ApiClient, namespaces: list[str], want: int, limit: float) -> int:
    """Wait until the namespaces hold `want` Scheduled events, or `limit` seconds pass, or their
    watches fail; how many were seen. A scheduler may write them after its last bind (an event
    recorder runs behind the binds), and the run's CPU windows must hold what they cost."""
    seen: set[str] = set()
    enough = asyncio.Event()
    query = [("fieldSelector", "reason=Scheduled")]

    def add(events: list[dict[str, Any]]) -> None:
        seen.update(event["metadata"]["uid"] for event in events)
        if len(seen) >= want:
            enough.set()

    async def count(namespace: str) -> None:
        path = f"/api/v1/namespaces/{namespace}/events"
        events, version = await list_items(api, path, query)
        add(events)
        async for event in watch_events(api, path, version, query, timeout_seconds=int(limit) + 1):
            if event.get("type") == "ADDED":
                add([event["object"]])

    watches = [asyncio.create_task(count(namespace)) for namespace in namespaces]
    ended = asyncio.gather(*watches, return_exceptions=True)  # a failed watch: stop waiting
    waiting = asyncio.create_task(enough.wait())
    try:
        await asyncio.wait([waiting, ended], timeout=limit, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in [waiting, *watches]:
            task.cancel()
        await asyncio.wait([waiting, ended])
    return len(seen)
