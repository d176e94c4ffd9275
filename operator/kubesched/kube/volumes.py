"""Volume binding writes: the VolumeBinding plugin's Reserve and PreBind (the volume binder's
AssumePodVolumes and BindPodVolumes in kube-scheduler 1.20's controller/volume/scheduling).

Once a node is chosen for a pod with unbound WaitForFirstConsumer claims, `assume_pod_volumes`
picks, with the very rules of CheckVolumeBinding's filter (`choose_volumes`), the PV each claim
binds to and the claims to provision there, and returns the cluster objects as they will be:
each chosen PV with its `claimRef` (and `pv.kubernetes.io/bound-by-controller`), each claim to
provision with `volume.kubernetes.io/selected-node`. The next pod of the batch sees those, and so
does the cache until the watch brings the written objects: no two pods take the same PV.

Before the pod is bound, `bind_pod_volumes` writes them:

- Static binding: the PV's claimRef and annotation, as 1.20 does (a merge patch carrying the PV's
  resourceVersion, so a PV that changed since it was chosen is not overwritten: 409, retried).
  1.20 then waits for the PV controller to bind the claim's side. kubesched writes that side
  itself, exactly as the PV controller's `bind()` would (the claim's `spec.volumeName` with the
  `pv.kubernetes.io/bind-completed` and `bound-by-controller` annotations, then both statuses to
  `Bound`, the claim's with the PV's capacity and access modes), and waits for nothing: a cluster
  without a kube-controller-manager (a bare API server, as in the tests) would never finish the
  binding otherwise, and where a PV controller runs it finds both sides consistent and has nothing
  left to do. Unlike 1.20, a statically bound claim gets no selected-node annotation: the PV
  controller never sets one for those either, and a stale one would pin the claim to a node.
- Dynamic provisioning: the claim's selected-node annotation, then, as 1.20, a poll every second
  until the claim is bound (by an external provisioner and the PV controller); the provisioner
  removing the annotation means it failed. Waits `provision_timeout` (1.20's bindTimeoutSeconds,
  600 s) at most.

Any failure returns its reason; the caller forgets the assumptions, reports FailedScheduling and
requeues the pod.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from kubesched.algorithm.generic import Algorithm, ScheduleResult
from kubesched.kube.client import TokenBucket, request
from kubesched.model.nodeinfo import ClusterObjects, NodeInfo
from kubesched.model.objects import Pod
from kubesched.plugins.volume_binding.filtering import (
    ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
    CheckVolumeBinding,
    VolumeBindingState,
    choose_volumes,
    is_bound_to_claim,
    pod_volume_state,
)
from kubesched.runtime.cache import SchedulerCache

ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
PROVISION_TIMEOUT = 600.0  # bindTimeoutSeconds
POLL_INTERVAL = 1.0
MERGE_PATCH = "application/merge-patch+json"


class VolumeBindingError(Exception):
    """The volumes chosen for a pod cannot be bound: the reason for FailedScheduling."""


@dataclass(frozen=True, slots=True)
class StaticBinding:
    """A claim and the PV it binds to: `pv` as the cache had it, `assumed` with the claimRef."""

    claim: Mapping[str, Any]
    pv: Mapping[str, Any]
    assumed: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Provision:
    """A claim to provision on the node: as the cache had it, and with selected-node."""

    claim: Mapping[str, Any]
    assumed: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PodVolumes:
    """What binding a pod's volumes on its node takes, and the objects as they will then be."""

    node_name: str
    bindings: tuple[StaticBinding, ...]
    provisions: tuple[Provision, ...]
    objects: ClusterObjects = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ScheduledWithVolumes(ScheduleResult):
    """A decision whose pod has volumes to bind before the pod itself."""

    volumes: PodVolumes | None = None


def with_volumes(result: ScheduleResult, volumes: PodVolumes) -> ScheduledWithVolumes:
    return ScheduledWithVolumes(**{f.name: getattr(result, f.name) for f in fields(result)}, volumes=volumes)


# --- the choice (pure) -------------------------------------------------------------------------


def binds_volumes(algorithm: Algorithm) -> bool:
    """A policy binds volumes when it checks them: CheckVolumeBinding brings the whole VolumeBinding
    plugin (Filter, Reserve, PreBind), as in 1.20's legacy registry."""
    return any(p.name == CheckVolumeBinding.name for p in algorithm.predicates)


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


def claim_ref(claim: Mapping[str, Any]) -> dict[str, Any]:
    """reference.GetReference for a claim."""
    meta = claim.get("metadata") or {}
    ref = {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
    }
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = meta["resourceVersion"]
    return ref


def _annotated(obj: Mapping[str, Any], key: str, value: str) -> dict[str, Any]:
    clone = copy.deepcopy(dict(obj))
    meta = clone.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), key: value}
    return clone


def bind_volume_to_claim(pv: Mapping[str, Any], claim: Mapping[str, Any]) -> dict[str, Any]:
    """GetBindVolumeToClaim: the PV with its claimRef naming the claim (and its uid), marked
    bound-by-controller unless its author pre-bound it to the claim."""
    clone = copy.deepcopy(dict(pv))
    if not is_bound_to_claim(pv, claim):
        clone = _annotated(clone, ANN_BOUND_BY_CONTROLLER, "yes")
    ref = (pv.get("spec") or {}).get("claimRef") or {}
    wanted = claim_ref(claim)
    if any(ref.get(k) != wanted[k] for k in ("name", "namespace", "uid")):
        clone["spec"] = {**(clone.get("spec") or {}), "claimRef": wanted}
    return clone


def assume_pod_volumes(pod: Pod, objects: ClusterObjects, node: NodeInfo) -> PodVolumes | None:
    """AssumePodVolumes: the PVs and provisions for `pod`'s unbound claims on `node` (None when
    there is nothing to bind). Raises VolumeBindingError when the node cannot take them."""
    if not pod.volumes:
        return None
    state = pod_volume_state(pod, objects)
    if not isinstance(state, VolumeBindingState) or not state.to_bind:
        return None  # no claims, or all bound (a Reject never reaches a chosen node)
    choice = choose_volumes(state.to_bind, node.name, node.node.labels)
    if not choice.satisfied or choice.error is not None:
        raise VolumeBindingError(choice.error or f"volumes of {pod.key} no longer fit on node {node.name}")
    pvs = dict(objects.persistent_volumes)
    claims = dict(objects.persistent_volume_claims)
    bindings = []
    for claim, pv_name in choice.static:
        pv = objects.persistent_volumes[pv_name]
        assumed = bind_volume_to_claim(pv, claim.pvc)
        pvs[pv_name] = assumed
        bindings.append(StaticBinding(claim.pvc, pv, assumed))
    provisions = []
    for claim in choice.provision:
        assumed = _annotated(claim.pvc, ANN_SELECTED_NODE, node.name)
        claims[_key(claim.pvc)] = assumed
        provisions.append(Provision(claim.pvc, assumed))
    after = replace(objects, persistent_volumes=pvs, persistent_volume_claims=claims)
    return PodVolumes(node.name, tuple(bindings), tuple(provisions), after)


# --- the cache (event loop) --------------------------------------------------------------------


def assume_in_cache(cache: SchedulerCache, volumes: PodVolumes) -> None:
    """Record the assumed PVs and claims until the watch brings the written ones. One the watch
    changed since the batch's snapshot is left as it is: its write will meet a conflict."""
    for binding in volumes.bindings:
        key = _key(binding.pv)
        if cache.get_object("PersistentVolume", key) is binding.pv:
            cache.set_object("PersistentVolume", key, binding.assumed)
    for provision in volumes.provisions:
        key = _key(provision.claim)
        if cache.get_object("PersistentVolumeClaim", key) is provision.claim:
            cache.set_object("PersistentVolumeClaim", key, provision.assumed)


def forget_in_cache(cache: SchedulerCache, volumes: PodVolumes) -> None:
    """RevertAssumedPodVolumes: put back what the cache had, unless the watch replaced it since."""
    for binding in volumes.bindings:
        key = _key(binding.pv)
        if cache.get_object("PersistentVolume", key) is binding.assumed:
            cache.set_object("PersistentVolume", key, binding.pv)
    for provision in volumes.provisions:
        key = _key(provision.claim)
        if cache.get_object("PersistentVolumeClaim", key) is provision.assumed:
            cache.set_object("PersistentVolumeClaim", key, provision.claim)


# --- the writes (PreBind) ----------------------------------------------------------------------


@dataclass
class VolumeWriter:
    """The API calls of BindPodVolumes, rate-limited like the binds."""

    api: client.ApiClient
    limiter: TokenBucket
    timeout: float = 30.0
    may_write: Callable[[], bool] | None = None
    provision_timeout: float = PROVISION_TIMEOUT
    poll_interval: float = POLL_INTERVAL
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    async def bind_pod_volumes(
        self, pod: Pod, volumes: PodVolumes, abandoned: Callable[[], bool] = lambda: False
    ) -> None:
        """Write the bindings and provisioning requests; raises VolumeBindingError. `abandoned`
        says the pod is gone: provisioning is no longer waited for."""
        for binding in volumes.bindings:
            await self._bind_static(binding)
        for provision in volumes.provisions:
            await self._patch(_claim_path(provision.claim), {"metadata": _annotations(provision.assumed)})
        if volumes.provisions:
            await self._wait_for_provisioning(volumes, abandoned)

    async def _bind_static(self, binding: StaticBinding) -> None:
        pv, claim = binding.assumed, binding.claim
        pv_name = str((pv.get("metadata") or {}).get("name"))
        meta = pv.get("metadata") or {}
        # 1.20's PV update: guarded by the resourceVersion the choice was made on.
        await self._patch(
            f"/api/v1/persistentvolumes/{pv_name}",
            {
                "metadata": {"resourceVersion": meta.get("resourceVersion"), **_annotations(pv)},
                "spec": {"claimRef": (pv.get("spec") or {}).get("claimRef")},
            },
        )
        # The PV controller's bind(): the claim's side and both statuses.
        await self._patch(
            _claim_path(claim),
            {
                "metadata": {"annotations": {ANN_BIND_COMPLETED: "yes", ANN_BOUND_BY_CONTROLLER: "yes"}},
                "spec": {"volumeName": pv_name},
            },
        )
        await self._patch(f"/api/v1/persistentvolumes/{pv_name}/status", {"status": {"phase": "Bound"}})
        spec = pv.get("spec") or {}
        status: dict[str, Any] = {"phase": "Bound", "capacity": spec.get("capacity") or {}}
        if spec.get("accessModes"):
            status["accessModes"] = spec["accessModes"]
        await self._patch(f"{_claim_path(claim)}/status", {"status": status})

    async def _wait_for_provisioning(self, volumes: PodVolumes, abandoned: Callable[[], bool]) -> None:
        """checkBindings for the claims to provision, every poll interval until all are bound."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.provision_timeout
        pending = [p.claim for p in volumes.provisions]
        while True:
            if abandoned():
                raise VolumeBindingError("pod does not exist any more")
            still = []
            for claim in pending:
                current = await self._get(_claim_path(claim))
                meta = current.get("metadata") or {}
                annotations = meta.get("annotations") or {}
                if annotations.get(ANN_SELECTED_NODE) != volumes.node_name:
                    raise VolumeBindingError(f'provisioning failed for PVC "{meta.get("name")}"')
                bound = (current.get("spec") or {}).get("volumeName") and ANN_BIND_COMPLETED in annotations
                if not bound:
                    still.append(claim)
            pending = still
            if not pending:
                return
            if loop.time() >= deadline:
                raise VolumeBindingError("binding volumes: timed out waiting for the condition")
            await self.sleep(self.poll_interval)

    async def _call(self, method: str, path: str, body: Any = None, content_type: str = MERGE_PATCH) -> Any:
        await self.limiter.acquire()
        if method != "GET" and self.may_write is not None and not self.may_write():
            raise VolumeBindingError("not the leader")
        try:
            status, reply = await request(
                self.api, method, path, body, content_type=content_type, timeout=self.timeout
            )
        except (OSError, TimeoutError, aiohttp.ClientError) as exc:
            raise VolumeBindingError(f"binding volumes: {method} {path}: {exc!r}") from exc
        if status >= 300:
            raise VolumeBindingError(f"binding volumes: {method} {path}: {status}: {reply}")
        return reply

    async def _patch(self, path: str, body: Mapping[str, Any]) -> None:
        await self._call("PATCH", path, body)

    async def _get(self, path: str) -> Mapping[str, Any]:
        reply = await self._call("GET", path, content_type="application/json")
        return reply if isinstance(reply, Mapping) else {}


def _claim_path(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"/api/v1/namespaces/{meta.get('namespace')}/persistentvolumeclaims/{meta.get('name')}"


def _annotations(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {"annotations": dict((obj.get("metadata") or {}).get("annotations") or {})}


__all__ = [
    "PodVolumes",
    "ScheduledWithVolumes",
    "VolumeBindingError",
    "VolumeWriter",
    "assume_in_cache",
    "assume_pod_volumes",
    "forget_in_cache",
    "with_volumes",
]
