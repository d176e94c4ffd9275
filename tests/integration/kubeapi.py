"""Reading pods and events back from the API server, for the integration tests."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched_dev.fixtures import wait_for


async def pods_by_name(api: ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    status, body = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods")
    assert status == 200, body
    return {p["metadata"]["name"]: p for p in body["items"]}


async def wait_bound(
    api: ApiClient, namespace: str, count: int, timeout: float = 60
) -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = {}

    async def bound() -> bool:
        nonlocal result
        result = await pods_by_name(api, namespace)
        return sum(1 for p in result.values() if p["spec"].get("nodeName")) >= count

    await wait_for(bound, timeout=timeout, interval=0.2)
    return result


async def events_for(api: ApiClient, namespace: str, pod: str) -> list[dict[str, Any]]:
    status, body = await request(
        api,
        "GET",
        f"/api/v1/namespaces/{namespace}/events",
        query=[("fieldSelector", f"involvedObject.name={pod}")],
    )
    assert status == 200, body
    return list(body["items"])


async def wait_events(
    api: ApiClient, namespace: str, pod: str, reason: str, timeout: float = 30
) -> list[dict[str, Any]]:
    """The pod's events with `reason`, once there is one: the recorder posts them after the bind."""

    async def found() -> list[dict[str, Any]]:
        return [e for e in await events_for(api, namespace, pod) if e["reason"] == reason]

    events: list[dict[str, Any]] = await wait_for(
        found, timeout=timeout, interval=0.2, message=f"a {reason} event for {namespace}/{pod}"
    )
    return events
