"""Kopf wiring: SchedulerPolicy events feed the policy controller; nothing else.

Every kind the scheduler reads has a watch of its own (kube/informer.py, app/startup.py), with the
re-list and reconcile that Kopf's watches lack; Kopf keeps the operator's own resources. Only an
`@on.event` handler, returning None: other handler kinds would make Kopf write annotations or
finalizers onto the objects, and a returned value would be patched into `status`. It is `async` so
that it runs on the event loop, which owns the cache and the queue (Kopf runs plain functions in a
thread pool). This module, and with it Kopf, is imported once scheduling has started (app/run.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from typing import Any

import kopf

from kubesched.kube.client import Configuration
from kubesched.kube.listing import LIST_PAGE
from kubesched.policy.controller import PolicyController
from kubesched.policy.store import API_GROUP, API_VERSION, PLURAL


class _NoEssence(kopf.AnnotationsDiffBaseStorage):
    """Kopf builds every event's "essence" (a deep copy of the body) to diff it for change handlers;
    with event handlers only, no diff is ever read, and the copy is pure waste on the event loop."""

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[kopf.FieldSpec] | None = None
    ) -> kopf.BodyEssence:
        return {}


def operator(
    registry: kopf.OperatorRegistry, *, stop_flag: asyncio.Future[None], ready_flag: asyncio.Event
) -> Coroutine[Any, Any, None]:
    """Kopf's operator over `registry`: one of many replicas, cluster-wide, with our settings."""
    return kopf.operator(
        registry=registry,
        settings=operator_settings(),
        standalone=True,
        clusterwide=True,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    )


def operator_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.diffbase_storage = _NoEssence()
    settings.peering.standalone = True
    settings.peering.clusterwide = True
    settings.posting.enabled = False  # our events are ours to post, with kube-scheduler's reasons
    # Resources are discovered once at start-up (the SchedulerPolicy CRD included); no CRD watch.
    settings.scanning.disabled = True
    # Listings in pages, as ours are: one response per resource holds the whole listing in memory
    # at once and parses it in one piece on the event loop.
    settings.watching.chunk_size = LIST_PAGE
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.networking.request_timeout = 60
    settings.networking.connect_timeout = 10
    # Per-object workers linger this long for the next event; shutdown waits for them.
    settings.queueing.idle_timeout = 1.0
    return settings


def build_registry(login: kopf.ConnectionInfo, policies: PolicyController) -> kopf.OperatorRegistry:
    """The SchedulerPolicy watch, feeding `policies`."""
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    async def _login(**_: Any) -> kopf.ConnectionInfo:
        return login

    @kopf.on.event(API_GROUP, API_VERSION, PLURAL, registry=registry)
    async def _policy(event: kopf.RawEvent, **_: Any) -> None:
        await policies.on_event(event.get("type"), event["object"])

    return registry


async def connection_info(conf: Configuration) -> kopf.ConnectionInfo:
    """The same endpoint and credentials for Kopf's watches."""
    target = conf.endpoint
    auth = target.headers.get("Authorization") or (await conf.authorization() if conf.authorization else None)
    scheme, _, token = (auth or "").partition(" ")
    cert, key = target.cert or (None, None)
    cert_data, key_data = target.cert_data or (None, None)
    return kopf.ConnectionInfo(
        server=conf.host,
        ca_path=target.ca_file,
        ca_data=target.ca_data.encode() if target.ca_data else None,
        insecure=target.insecure,
        scheme=scheme or None,
        token=token or None,
        certificate_path=cert,
        certificate_data=cert_data,
        private_key_path=key,
        private_key_data=key_data,
        default_namespace="default",
    )
