"""Volume binding PreBind: the API writes that bind a pod's volumes before the pod (the volume
binder's BindPodVolumes in kube-scheduler 1.20's controller/volume/scheduling). What to write was
chosen at Reserve (kubesched.algorithm.volume_reserve).

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

Any failure raises VolumeBindingError with its reason; the caller forgets the assumptions, reports
FailedScheduling and requeues the pod.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from kubesched.algorithm.volume_reserve import (
    ANN_BOUND_BY_CONTROLLER,
    PodVolumes,
    StaticBinding,
    VolumeBindingError,
)
from kubesched.kube.client import MERGE_PATCH, Api, TokenBucket, request
from kubesched.model.objects import Pod
from kubesched.plugins.volume_binding.filtering import ANN_BIND_COMPLETED, ANN_SELECTED_NODE

PROVISION_TIMEOUT = 600.0  # bindTimeoutSeconds
POLL_INTERVAL = 1.0


@dataclass
class VolumeWriter:
    """The API calls of BindPodVolumes, rate-limited like the binds."""

    api: Api
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


__all__ = ["POLL_INTERVAL", "PROVISION_TIMEOUT", "VolumeWriter"]
