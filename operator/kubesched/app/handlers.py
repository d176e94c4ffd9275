"""Kopf wiring: watch events feed the scheduler's cache and queue, and SchedulerPolicies the
policy controller; nothing else.

Only `@on.event` handlers, all returning None: other handler kinds on pods would make Kopf
write annotations or finalizers onto every pod, and a returned value would be patched into
`status`. They are `async` so that they run on the event loop, which owns the cache and the
queue (Kopf runs plain functions in a thread pool). Pods and nodes, the busy streams, have
watches of their own (informer.py); pods with kube-scheduler's non-terminal field selector.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import kopf

from kubesched.kube.client import LIST_PAGE
from kubesched.policy.store import API_GROUP, API_VERSION, PLURAL
from kubesched.runtime.scheduler import Scheduler

if TYPE_CHECKING:
    from kubesched.policy.controller import PolicyController

NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"

# (group, version, plural, kind) of the objects some plugins read.
WATCHED_OBJECTS = (
    ("", "v1", "services", "Service"),
    ("", "v1", "replicationcontrollers", "ReplicationController"),
    ("apps", "v1", "replicasets", "ReplicaSet"),
    ("apps", "v1", "statefulsets", "StatefulSet"),
    ("", "v1", "persistentvolumes", "PersistentVolume"),
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    ("storage.k8s.io", "v1", "storageclasses", "StorageClass"),
    ("storage.k8s.io", "v1", "csinodes", "CSINode"),
    # For preemption. Kubernetes 1.20 serves only v1beta1, 1.25+ only v1: each watch whose API is
    # missing is skipped (Kopf warns once at start-up), and one PDB seen through both is one entry.
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    ("policy", "v1beta1", "poddisruptionbudgets", "PodDisruptionBudget"),
)


class _NoEssence(kopf.AnnotationsDiffBaseStorage):
    """Kopf builds every event's "essence" (a deep copy of the body) to diff it for change handlers;
    with event handlers only, no diff is ever read: about a tenth of the event loop at 100 pods/s."""

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[kopf.FieldSpec] | None = None
    ) -> kopf.BodyEssence:
        return {}


def operator_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.diffbase_storage = _NoEssence()
    settings.peering.standalone = True
    settings.peering.clusterwide = True
    settings.posting.enabled = False  # our events are ours to post, with kube-scheduler's reasons
    # Resources are discovered once at start-up (the SchedulerPolicy CRD included); no CRD watch.
    settings.scanning.disabled = True
    # Listings in pages, as ours are: at 5,000 nodes and 10,000 pods, one response per resource
    # (nodes and pods were Kopf's then) took peak RSS from 286 to 446 MiB and stalled the loop 418 ms.
    settings.watching.chunk_size = LIST_PAGE
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.networking.request_timeout = 60
    settings.networking.connect_timeout = 10
    # Per-object workers linger this long for the next event; shutdown waits for them.
    settings.queueing.idle_timeout = 1.0
    return settings


def build_registry(
    scheduler: Scheduler, login: kopf.ConnectionInfo, policies: PolicyController | None = None
) -> kopf.OperatorRegistry:
    """The watches; SchedulerPolicies only with `policies` (None when their CRD is not installed)."""
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    async def _login(**_: Any) -> kopf.ConnectionInfo:
        return login

    for group, version, plural, kind in WATCHED_OBJECTS:
        _watch_object(registry, scheduler, group, version, plural, kind)

    if policies is not None:

        @kopf.on.event(API_GROUP, API_VERSION, PLURAL, registry=registry)
        async def _policy(event: kopf.RawEvent, **_: Any) -> None:
            await policies.on_event(event.get("type"), event["object"])

    return registry


def _watch_object(
    registry: kopf.OperatorRegistry, scheduler: Scheduler, group: str, version: str, plural: str, kind: str
) -> None:
    api_version = f"{group}/{version}" if group else version

    @kopf.on.event(api_version, plural, registry=registry)
    async def _object(event: kopf.RawEvent, **_: Any) -> None:
        scheduler.on_object(kind, event.get("type"), event["object"])
