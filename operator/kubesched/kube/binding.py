"""Binding a pod to its node through the `pods/binding` subresource."""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable
from typing import NamedTuple, Protocol

import aiohttp
from kubernetes_asyncio import client

from kubesched.kube.client import TokenBucket, request
from kubesched.kube.volumes import PodVolumes, VolumeBindingError, VolumeWriter
from kubesched.model.objects import Pod


class BindOutcome(enum.Enum):
    BOUND = "bound"
    CONFLICT = "conflict"  # 409: already assigned, by us or someone else; the watch tells which
    GONE = "gone"  # 404: the pod was deleted meanwhile
    FAILED = "failed"  # anything else: retry with backoff
    NOT_LEADER = "not-leader"  # not sent: this replica may not bind now (its lease lapsed or was lost)


class ExtenderBinder(Protocol):
    """A scheduler extender with a bindVerb (algorithm.extenders.HTTPExtender)."""

    @property
    def name(self) -> str: ...

    def bind(self, pod: Pod, node_name: str) -> None: ...


class BindResult(NamedTuple):
    outcome: BindOutcome
    reason: str  # the API server's reason when it failed
    sent_at: float | None  # wall-clock time the request left (None: never sent)


class Binder:
    def __init__(
        self,
        api: client.ApiClient,
        limiter: TokenBucket,
        timeout: float = 30.0,
        *,
        may_bind: Callable[[], bool] | None = None,
    ) -> None:
        self._api = api
        self._limiter = limiter
        self._timeout = timeout
        self._may_bind = may_bind

    async def bind(self, pod: Pod, node_name: str, extender: ExtenderBinder | None = None) -> BindResult:
        """Bind through the API server, or through `extender` (a scheduler extender's bindVerb)."""
        if extender is not None:
            return await self._bind_with_extender(pod, node_name, extender)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        await self._limiter.acquire()
        # Checked after the rate limiter's wait, with nothing awaited before the request leaves:
        # a leader whose renew deadline passed a microsecond ago sends nothing.
        if self._may_bind is not None and not self._may_bind():
            return BindResult(BindOutcome.NOT_LEADER, "not the leader", None)
        sent_at = time.time()
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding"
        try:
            status, message = await request(self._api, "POST", path, body, timeout=self._timeout)
        except (OSError, TimeoutError, aiohttp.ClientError) as exc:
            return BindResult(BindOutcome.FAILED, repr(exc), sent_at)
        if status < 300:
            return BindResult(BindOutcome.BOUND, "", sent_at)
        if status == 409:
            return BindResult(BindOutcome.CONFLICT, str(message), sent_at)
        if status == 404:
            return BindResult(BindOutcome.GONE, str(message), sent_at)
        return BindResult(BindOutcome.FAILED, f"{status}: {message}", sent_at)

    async def bind_volumes(
        self, pod: Pod, volumes: PodVolumes, abandoned: Callable[[], bool] = lambda: False
    ) -> str | None:
        """PreBind: write the bindings of the pod's volumes (kubesched.kube.volumes); why it failed."""
        writer = VolumeWriter(self._api, self._limiter, self._timeout, self._may_bind)
        try:
            await writer.bind_pod_volumes(pod, volumes, abandoned)
        except VolumeBindingError as exc:
            return str(exc)
        return None

    async def _bind_with_extender(self, pod: Pod, node_name: str, extender: ExtenderBinder) -> BindResult:
        await self._limiter.acquire()
        if self._may_bind is not None and not self._may_bind():
            return BindResult(BindOutcome.NOT_LEADER, "not the leader", None)
        sent_at = time.time()
        try:
            # The extender client is blocking HTTP bounded by its httpTimeout: off the loop.
            await asyncio.to_thread(extender.bind, pod, node_name)
        except Exception as exc:
            return BindResult(BindOutcome.FAILED, f"extender {extender.name}: {exc}", sent_at)
        return BindResult(BindOutcome.BOUND, "", sent_at)
