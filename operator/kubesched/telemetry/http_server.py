"""The HTTP endpoints on the metrics port: `/metrics`, `/healthz` (alive), `/readyz` (caches synced)
`/debug/cache` (what the cache holds, read-only: for consistency checks against a listing),
`/debug/sizes` (the entries of each of the scheduler's maps and sets: telemetry/sizes.py),
`/debug/tracemalloc` (allocations grown since its first call, or since the last `?rebase=1`, by
traceback or `?group=lineno`, when PYTHONTRACEMALLOC is set) and `/debug/garbage` (a full
collection, and what it freed by type: what reference cycles held).

One small aiohttp server on the event loop: `/healthz` answering at all shows that the loop is
not stuck, which is what a liveness probe should learn. Every replica is ready once its cache is
synced, leader or not: a follower is a warm standby, and leadership shows in the metric
`leader_election_master_status`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from kubesched.telemetry.sizes import MemoryDiff, cyclic_garbage, process_sizes


class Endpoints:
    def __init__(
        self, ready: Callable[[], bool], cache_view: Callable[[], dict[str, Any]] | None = None
    ) -> None:
        self._ready = ready
        self.cache_view = cache_view  # set once the cache exists
        self.sizes_view: Callable[[], dict[str, int]] | None = None  # set once the scheduler exists
        self._memory = MemoryDiff()
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/debug/cache", self._cache)
        app.router.add_get("/debug/sizes", self._sizes)
        app.router.add_get("/debug/tracemalloc", self._tracemalloc)
        app.router.add_get("/debug/garbage", self._garbage)
        return app

    async def start(self, port: int, host: str | None = None) -> None:
        """Listen on `port` (all interfaces unless `host`)."""
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _cache(self, _: web.Request) -> web.Response:
        if self.cache_view is None:
            return web.Response(status=503, text="no cache yet")
        return web.json_response(self.cache_view())

    async def _sizes(self, _: web.Request) -> web.Response:
        own = self.sizes_view() if self.sizes_view is not None else {}
        return web.json_response({**own, **process_sizes()})

    async def _tracemalloc(self, request: web.Request) -> web.Response:
        group = request.query.get("group", "traceback")
        if group not in ("traceback", "lineno", "filename"):
            return web.Response(status=400, text="group: traceback, lineno or filename")
        top = self._memory.top(group=group, rebase=request.query.get("rebase") == "1")
        if top is None:
            return web.Response(status=404, text="not tracing: set PYTHONTRACEMALLOC=N")
        return web.json_response(top)

    async def _garbage(self, _: web.Request) -> web.Response:
        return web.json_response(cyclic_garbage())

    async def _readyz(self, _: web.Request) -> web.Response:
        if self._ready():
            return web.Response(text="ok")
        return web.Response(status=503, text="caches not synced")
