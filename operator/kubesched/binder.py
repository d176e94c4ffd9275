"""Binding a pod to its node through the `pods/binding` subresource."""

from __future__ import annotations

import enum

import aiohttp
from kubernetes_asyncio import client

from kubesched.kube import TokenBucket, request
from kubesched.model.objects import Pod


class BindOutcome(enum.Enum):
    BOUND = "bound"
    CONFLICT = "conflict"  # 409: already assigned, by us or someone else; the watch tells which
    GONE = "gone"  # 404: the pod was deleted meanwhile
    FAILED = "failed"  # anything else: retry with backoff


class Binder:
    def __init__(self, api: client.ApiClient, limiter: TokenBucket, timeout: float = 30.0) -> None:
        self._api = api
        self._limiter = limiter
        self._timeout = timeout

    async def bind(self, pod: Pod, node_name: str) -> tuple[BindOutcome, str]:
        """Returns the outcome and, when it failed, the API server's reason."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        await self._limiter.acquire()
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding"
        try:
            status, message = await request(self._api, "POST", path, body, timeout=self._timeout)
        except (OSError, TimeoutError, aiohttp.ClientError) as exc:
            return BindOutcome.FAILED, repr(exc)
        if status < 300:
            return BindOutcome.BOUND, ""
        if status == 409:
            return BindOutcome.CONFLICT, str(message)
        if status == 404:
            return BindOutcome.GONE, str(message)
        return BindOutcome.FAILED, f"{status}: {message}"
