"""The probe and metrics endpoints answer what a kubelet and Prometheus expect."""

from __future__ import annotations

from aiohttp.test_utils import TestClient, TestServer

from kubesched import metrics
from kubesched.endpoints import Endpoints


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
