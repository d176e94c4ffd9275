"""The probe and metrics endpoints answer what a kubelet and Prometheus expect."""

from __future__ import annotations

import gc

from aiohttp.test_utils import TestClient, TestServer

from kubesched.model.objects import node_from_dict, pod_from_dict
from kubesched.runtime.cache import SchedulerCache
from kubesched.telemetry import metrics
from kubesched.telemetry.http_server import Endpoints
from kubesched_dev.fixtures import make_node, make_pod


async def test_ready_only_once_synced_alive_all_along_and_leadership_in_metrics() -> None:
    synced = False
    endpoints = Endpoints(ready=lambda: synced)
    metrics.LEADER_STATUS.labels("endpoints-test").set(1)
    async with TestClient(TestServer(endpoints.app())) as http:
        readyz = await http.get("/readyz")
        assert (readyz.status, await readyz.text()) == (503, "caches not synced")
        assert (await http.get("/healthz")).status == 200
        synced = True
        assert (await http.get("/readyz")).status == 200
        scraped = await http.get("/metrics")
        assert scraped.status == 200
        assert scraped.headers["Content-Type"].startswith("text/plain")
        assert 'leader_election_master_status{name="endpoints-test"} 1.0' in await scraped.text()


async def test_debug_cache_shows_each_node_s_requests_and_pods_read_only() -> None:
    cache = SchedulerCache()
    cache.set_node(node_from_dict(make_node("n1", cpu="4")))
    pod = pod_from_dict(make_pod("p", "ns", cpu="1500m", memory="1Gi"))
    cache.assume(pod, "n1")
    endpoints = Endpoints(ready=lambda: True)
    async with TestClient(TestServer(endpoints.app())) as http:
        assert (await http.get("/debug/cache")).status == 503  # no cache yet
        endpoints.cache_view = cache.describe
        view = await (await http.get("/debug/cache")).json()
        assert view["nodes"]["n1"] == {"milli_cpu": 1500, "memory": 2**30, "pods": [pod.uid]}
        assert view["assumed"] == [pod.uid] and view["orphans"] == {}
        assert (await http.post("/debug/cache")).status == 405


class _Cycle:
    def __init__(self) -> None:
        self.me = self


async def test_debug_garbage_collects_and_counts_what_cycles_held() -> None:
    endpoints = Endpoints(ready=lambda: True)
    gc.disable()  # or an automatic collection may free them first
    try:
        async with TestClient(TestServer(endpoints.app())) as http:
            for _ in range(3):
                _Cycle()
            found = await (await http.get("/debug/garbage")).json()
            assert found.get(f"{__name__}._Cycle") == 3, found
            assert f"{__name__}._Cycle" not in await (await http.get("/debug/garbage")).json()
    finally:
        gc.enable()
