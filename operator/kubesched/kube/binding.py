"""Binding a pod to its node through the `pods/binding` subresource."""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable
from typing import NamedTuple, Protocol

import aiohttp

from kubesched.algorithm.volume_reserve import PodVolumes, VolumeBindingError
from kubesched.kube.client import Api, TokenBucket, request
from kubesched.kube.volume_writer import VolumeWriter
from kubesched.model.objects import Pod


def _unread(text: str) -> None:
    """A successful bind's reply (a Status) says nothing the outcome does not: not parsed."""


class BindOutcome(enum.Enum):
    BOUND = "bound"
    CONFLICT = "conflict"  # 409: already assigned, by us or someone else; the watch tells which
    GONE = "gone"  # 404: the pod was deleted meanwhile
    FAILED = "failed"  # any other reply (a 5xx too: the server is there and said no): retry with backoff
    UNREACHABLE = "unreachable"  # no reply at all: hold the bind, send it again once the server answers
    NOT_LEADER = "not-leader"  # not sent: this replica may not bind now (its lease lapsed or was lost)
    WITHDRAWN = "withdrawn"  # not sent: the caller's `still_valid` said no after the rate limiter's wait


# No reply came (refused, reset, TLS, EOF mid-reply, a client timeout): the server is down, restarting
# or cut off. A request that broke off may still have landed; sent again, it meets 409. An aiohttp
# error with a reply (ClientResponseError) or a bad URL is not among these.
UNREACHABLE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    aiohttp.ClientConnectionError,
    aiohttp.ClientPayloadError,
)
PROBE_PATH = "/readyz"  # readable by every authenticated client (system:public-info-viewer)


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
        api: Api,
        limiter: TokenBucket,
        timeout: float = 30.0,
        *,
        may_bind: Callable[[], bool] | None = None,
    ) -> None:
        self._api = api
        self._limiter = limiter
        self._timeout = timeout
        self._may_bind = may_bind

    async def bind(
        self,
        pod: Pod,
        node_name: str,
        extender: ExtenderBinder | None = None,
        *,
        still_valid: Callable[[], bool] = lambda: True,
    ) -> BindResult:
        """Bind through the API server, or through `extender` (a scheduler extender's bindVerb), unless
        `still_valid` says no once the rate limiter lets the request go."""
        if extender is not None:
            return await self._bind_with_extender(pod, node_name, extender, still_valid)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        refused = await self._admit(still_valid)
        if refused is not None:
            return refused
        sent_at = time.time()
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding"
        try:
            status, message = await request(
                self._api, "POST", path, body, timeout=self._timeout, decode=_unread
            )
        except UNREACHABLE_ERRORS as exc:
            return BindResult(BindOutcome.UNREACHABLE, repr(exc), sent_at)
        except aiohttp.ClientError as exc:
            return BindResult(BindOutcome.FAILED, repr(exc), sent_at)
        if status < 300:
            return BindResult(BindOutcome.BOUND, "", sent_at)
        if status == 409:
            return BindResult(BindOutcome.CONFLICT, str(message), sent_at)
        if status == 404:
            return BindResult(BindOutcome.GONE, str(message), sent_at)
        return BindResult(BindOutcome.FAILED, f"{status}: {message}", sent_at)

    async def answers(self, timeout: float = 2.0) -> bool:
        """Whether the API server is back: its /readyz says ok, or it replies with anything but a 5xx
        (a 403 or 404: the probe path is not ours to read, and the binds' own replies decide)."""
        try:
            status, _ = await request(self._api, "GET", PROBE_PATH, timeout=timeout)
        except UNREACHABLE_ERRORS:
            return False
        return status < 500  # 500 from /readyz: up, not ready yet (etcd, start-up hooks)

    async def bind_volumes(
        self, pod: Pod, volumes: PodVolumes, abandoned: Callable[[], bool] = lambda: False
    ) -> str | None:
        """PreBind: write the bindings of the pod's volumes (kubesched.kube.volume_writer); why it failed."""
        writer = VolumeWriter(self._api, self._limiter, self._timeout, self._may_bind)
        try:
            await writer.bind_pod_volumes(pod, volumes, abandoned)
        except VolumeBindingError as exc:
            return str(exc)
        return None

    async def _admit(self, still_valid: Callable[[], bool]) -> BindResult | None:
        """Wait for the rate limiter, then why the bind must not be sent; None: send it now."""
        await self._limiter.acquire()
        # Checked after the rate limiter's wait, and the caller awaits nothing else before the
        # request leaves: a leader whose renew deadline passed a microsecond ago sends nothing, nor
        # a bind to a node whose deletion the cache learned while this one waited.
        if self._may_bind is not None and not self._may_bind():
            return BindResult(BindOutcome.NOT_LEADER, "not the leader", None)
        if not still_valid():
            return BindResult(BindOutcome.WITHDRAWN, "no longer valid", None)
        return None

    async def _bind_with_extender(
        self, pod: Pod, node_name: str, extender: ExtenderBinder, still_valid: Callable[[], bool]
    ) -> BindResult:
        refused = await self._admit(still_valid)
        if refused is not None:
            return refused
        sent_at = time.time()
        try:
            # The extender client is blocking HTTP bounded by its httpTimeout: off the loop.
            await asyncio.to_thread(extender.bind, pod, node_name)
        except Exception as exc:  # an ExtenderError's message names the extender and the verb
            return BindResult(BindOutcome.FAILED, str(exc), sent_at)
        return BindResult(BindOutcome.BOUND, "", sent_at)
