"""ElasticQuotas through the API: manifests, creation, deletion and `status.used` (shared by the
integration and end-to-end quota tests)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched_dev.fixtures import wait_for

API = "/apis/scheduling.x-k8s.io/v1alpha1"


def quotas_path(namespace: str) -> str:
    return f"{API}/namespaces/{namespace}/elasticquotas"


def elastic_quota(
    name: str, namespace: str, min: Mapping[str, Any], max: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"min": dict(min), "max": dict(max)},
    }


async def create_quota(api: ApiClient, manifest: Mapping[str, Any]) -> None:
    status, reply = await request(api, "POST", quotas_path(manifest["metadata"]["namespace"]), manifest)
    assert status == 201, reply


async def delete_quotas(api: ApiClient, namespace: str) -> None:
    """Every ElasticQuota of `namespace`: no namespace controller runs, and a quota's min left
    behind would count in later tests' sum of mins."""
    status, reply = await request(api, "DELETE", quotas_path(namespace))
    assert status in (200, 404), reply


async def used(api: ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    status, reply = await request(api, "GET", f"{quotas_path(namespace)}/{name}")
    assert status == 200, reply
    found: dict[str, Any] | None = (reply.get("status") or {}).get("used")
    return found


async def wait_used(api: ApiClient, namespace: str, name: str, expected: Mapping[str, str]) -> None:
    seen: list[Any] = []

    async def written() -> bool:
        seen.append(await used(api, namespace, name))
        return seen[-1] == expected

    await wait_for(written, timeout=60, interval=0.3, message=f"{namespace}/{name} status.used {expected}")
    print(f"{namespace}/{name} status.used: {seen[-1]}")
