"""The cluster state the scheduler sees, read live or saved to a file, so a decision can be replayed.

`read_cluster` makes the scheduler's start-up LISTs (the objects the plugins read, nodes, every
non-terminal pod, bound or pending) plus the SchedulerPolicies and the Leases on which kubesched
leaders publish their policy; `kubesched snapshot save` writes that as one JSON document, and
`simulate --nodes-from FILE` and `explain --snapshot FILE` read it back. The document holds the
raw API objects (managedFields dropped), in listing order: node order matters to the scheduler
(the search for feasible nodes starts where the last one stopped), and pod order is the order in
which the scheduler's queue received them.

    {"apiVersion": "kubesched.io/v1alpha1", "kind": "ClusterSnapshot", "version": 1,
     "savedAt": "...", "source": "https://...",
     "nodes": [...], "pods": [...], "objects": {"Service": [...], "PersistentVolume": [...], ...},
     "schedulerPolicies": [...] | null, "schedulerLeases": [...] | null}
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from kubesched.kube.client import Api, request
from kubesched.kube.events import now_rfc3339
from kubesched.kube.listing import NotServed, list_all
from kubesched.model.kinds import BUDGET_KIND, NODES, OBJECT_FIELDS, OBJECT_KIND_NAMES, PODS, WATCHED_OBJECTS
from kubesched.model.objects import node_from_dict, pod_from_dict
from kubesched.policy.published import SCHEDULER_ANNOTATION
from kubesched.policy.store import API_GROUP, API_VERSION, PLURAL
from kubesched.runtime.cache import SchedulerCache

SNAPSHOT_API_VERSION: Final = f"{API_GROUP}/{API_VERSION}"
SNAPSHOT_KIND: Final = "ClusterSnapshot"
FORMAT_VERSION: Final = 1
STDIO: Final = ("-", "/dev/stdin", "/dev/stdout")
LEASES: Final = "/apis/coordination.k8s.io/v1/leases"


class SnapshotError(ValueError):
    """A snapshot file that cannot be read, or is not one."""


@dataclass(frozen=True, slots=True)
class ClusterState:
    """Raw API objects: what a scheduler replica holds in its cache, plus the SchedulerPolicies."""

    nodes: Sequence[Mapping[str, Any]]
    pods: Sequence[Mapping[str, Any]]  # non-terminal, bound and pending
    objects: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)  # by kind
    policies: Sequence[Mapping[str, Any]] | None = None  # None: their CRD was not readable
    saved_at: str = ""
    source: str = ""
    # The Leases on which kubesched leaders publish their policy; None: Leases were not readable.
    leases: Sequence[Mapping[str, Any]] | None = None

    def cache(self, leave_out: frozenset[str] = frozenset()) -> SchedulerCache:
        """A cache filled as the start-up sync fills it: objects, nodes, then bound pods (uids in
        `leave_out` excepted)."""
        cache = SchedulerCache()
        for kind, items in self.objects.items():
            for obj in items:
                if kind in OBJECT_FIELDS:
                    cache.set_object(kind, object_key(obj), obj)
                elif kind == BUDGET_KIND:
                    cache.set_budget(object_key(obj), obj)
        for raw in self.nodes:
            cache.set_node(node_from_dict(raw))
        for raw in self.pods:
            pod = pod_from_dict(raw)
            if pod.node_name and pod.uid and pod.uid not in leave_out:
                cache.set_pod(pod)
        return cache

    def pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        for raw in self.pods:
            meta = raw.get("metadata") or {}
            if meta.get("namespace") == namespace and meta.get("name") == name:
                return raw
        return None

    def document(self) -> dict[str, Any]:
        return {
            "apiVersion": SNAPSHOT_API_VERSION,
            "kind": SNAPSHOT_KIND,
            "version": FORMAT_VERSION,
            "savedAt": self.saved_at,
            "source": self.source,
            "nodes": [_trimmed(o) for o in self.nodes],
            "pods": [_trimmed(o) for o in self.pods],
            "objects": {kind: [_trimmed(o) for o in items] for kind, items in self.objects.items()},
            "schedulerPolicies": None if self.policies is None else [_trimmed(o) for o in self.policies],
            "schedulerLeases": None if self.leases is None else [_trimmed(o) for o in self.leases],
        }

    @classmethod
    def from_document(cls, document: Any) -> ClusterState:
        """The state a snapshot document holds; raises SnapshotError when it is not one we can read."""
        if not isinstance(document, Mapping) or document.get("kind") != SNAPSHOT_KIND:
            raise SnapshotError(f'not a {SNAPSHOT_KIND} (no "kind": "{SNAPSHOT_KIND}")')
        version = document.get("version")
        if version != FORMAT_VERSION:
            raise SnapshotError(
                f"format version {version!r} is not supported (this kubesched reads {FORMAT_VERSION})"
            )
        nodes = _objects(document, "nodes")
        pods = _objects(document, "pods")
        raw_objects = document.get("objects") or {}
        if not isinstance(raw_objects, Mapping):
            raise SnapshotError("objects: must be an object of lists by kind")
        unknown = sorted(set(raw_objects) - OBJECT_KIND_NAMES)
        if unknown:
            raise SnapshotError(f"objects: unknown kind(s) {', '.join(unknown)}")
        objects = {kind: _objects(raw_objects, kind) for kind in raw_objects}
        policies = None
        if document.get("schedulerPolicies") is not None:
            policies = _objects(document, "schedulerPolicies")
        leases = None  # absent from the snapshots of older versions
        if document.get("schedulerLeases") is not None:
            leases = _objects(document, "schedulerLeases")
        return cls(
            nodes,
            pods,
            objects,
            policies,
            str(document.get("savedAt") or ""),
            str(document.get("source") or ""),
            leases,
        )


def object_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name`, or `name` for a cluster-scoped object: how the cache keys them."""
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta.get("name", ""))


def _objects(document: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = document.get(key)
    if items is None:
        return []
    if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
        raise SnapshotError(f"{key}: must be a list of objects")
    return items


def _trimmed(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """`obj` without metadata.managedFields: bulk that no scheduler reads."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


async def scheduler_policies(api: Api) -> list[dict[str, Any]] | None:
    """Every SchedulerPolicy, or None when their CRD is not installed (or not readable)."""
    path = f"/apis/{API_GROUP}/{API_VERSION}/{PLURAL}"
    status, body = await request(api, "GET", path, query=[("limit", 1)], timeout=30)
    if status in (403, 404):
        return None
    if status >= 300:
        raise RuntimeError(f"listing SchedulerPolicies failed: {status} {body}")
    return await list_all(api, path)


async def scheduler_leases(api: Api) -> list[dict[str, Any]] | None:
    """The Leases that publish a kubesched leader's policy, or None when Leases are not readable."""
    status, body = await request(api, "GET", LEASES, query=[("limit", 1)], timeout=30)
    if status in (403, 404):
        return None
    if status >= 300:
        raise RuntimeError(f"listing Leases failed: {status} {body}")
    # Every node has a Lease in kube-node-lease: thousands, none of them a scheduler's.
    leases = await list_all(api, LEASES, fieldSelector="metadata.namespace!=kube-node-lease")
    return [lease for lease in leases if SCHEDULER_ANNOTATION in (lease["metadata"].get("annotations") or {})]


async def read_cluster(api: Api) -> ClusterState:
    """The start-up sync's LISTs (objects, nodes, non-terminal pods) and the SchedulerPolicies."""
    objects: dict[str, dict[str, dict[str, Any]]] = {}
    for watched in WATCHED_OBJECTS:
        try:
            listed = await list_all(api, watched.path, **watched.query)
        except NotServed:
            continue  # e.g. policy/v1 on Kubernetes 1.20
        found = objects.setdefault(watched.kind, {})
        for obj in listed:  # a kind served in two versions is one set of objects
            found.setdefault(object_key(obj), obj)
    nodes = await list_all(api, NODES.path, **NODES.query)
    pods = await list_all(api, PODS.path, **PODS.query)
    policies = await scheduler_policies(api)
    leases = await scheduler_leases(api)
    source = str(getattr(api.configuration, "host", "") or "")
    by_kind = {kind: list(found.values()) for kind, found in objects.items()}
    return ClusterState(nodes, pods, by_kind, policies, now_rfc3339(), source, leases)


def save(state: ClusterState, path: str) -> None:
    """Write `state` as JSON to `path` (`-`: standard output)."""
    text = json.dumps(state.document(), indent=1, sort_keys=False) + "\n"
    if path in STDIO:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    Path(path).write_text(text, encoding="utf-8")


def load(path: str) -> ClusterState:
    """Read a snapshot file (`-`: standard input); raises SnapshotError naming the file."""
    try:
        text = sys.stdin.read() if path in STDIO else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{path}: cannot read: {exc}") from exc
    try:
        # Written as JSON; YAML (a converted or hand-edited copy) is read too.
        document = yaml.safe_load(text) if path.endswith((".yaml", ".yml")) else json.loads(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise SnapshotError(f"{path}: not valid JSON or YAML: {exc}") from exc
    try:
        return ClusterState.from_document(document)
    except SnapshotError as exc:
        raise SnapshotError(f"{path}: {exc}") from exc
