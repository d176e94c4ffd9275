"""Volume binding Reserve: the volumes a pod takes on its chosen node (the volume binder's
AssumePodVolumes and GetBindVolumeToClaim in kube-scheduler 1.20's controller/volume/scheduling).

Once a node is chosen for a pod with unbound WaitForFirstConsumer claims, `assume_pod_volumes`
picks, with the very rules of CheckVolumeBinding's filter (`choose_volumes`), the PV each claim
binds to and the claims to provision there, and returns the cluster objects as they will be:
each chosen PV with its `claimRef` (and `pv.kubernetes.io/bound-by-controller`), each claim to
provision with `volume.kubernetes.io/selected-node`. The next pod of the batch sees those, and so
does the cache (kubesched.runtime.volumes) until the watch brings the written objects: no two pods
take the same PV. kubesched.kube.volume_writer writes them before the pod is bound (PreBind).

Pure: the objects given are never changed, the assumed ones are copies.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from kubesched.algorithm.generic import Algorithm, ScheduleResult
from kubesched.model.nodeinfo import ClusterObjects, NodeInfo
from kubesched.model.objects import Pod
from kubesched.plugins.volume_binding.filtering import (
    ANN_SELECTED_NODE,
    CheckVolumeBinding,
    VolumeBindingState,
    choose_volumes,
    is_bound_to_claim,
    pod_volume_state,
)

ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"


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


# (kind, the object as the cache had it, the object as assumed)
Change = tuple[str, Mapping[str, Any], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class PodVolumes:
    """What binding a pod's volumes on its node takes, and the objects as they will then be."""

    node_name: str
    bindings: tuple[StaticBinding, ...]
    provisions: tuple[Provision, ...]
    objects: ClusterObjects = field(compare=False, repr=False)

    def changes(self) -> tuple[Change, ...]:
        """Each object the assumption changes: the PVs bound, then the claims to provision."""
        return (
            *(("PersistentVolume", b.pv, b.assumed) for b in self.bindings),
            *(("PersistentVolumeClaim", p.claim, p.assumed) for p in self.provisions),
        )


@dataclass(frozen=True, slots=True)
class ScheduledWithVolumes(ScheduleResult):
    """A decision whose pod has volumes to bind before the pod itself."""

    volumes: PodVolumes | None = None


def with_volumes(result: ScheduleResult, volumes: PodVolumes) -> ScheduledWithVolumes:
    """`result`, carrying the volumes its pod binds on the chosen node."""
    return ScheduledWithVolumes(**{f.name: getattr(result, f.name) for f in fields(result)}, volumes=volumes)


def binds_volumes(algorithm: Algorithm) -> bool:
    """A policy binds volumes when it checks them: CheckVolumeBinding brings the whole VolumeBinding
    plugin (Filter, Reserve, PreBind), as in 1.20's legacy registry."""
    return any(p.name == CheckVolumeBinding.name for p in algorithm.predicates)


def object_key(obj: Mapping[str, Any]) -> str:
    """The key ClusterObjects and the cache file the object under: `namespace/name`, or `name`."""
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
    if not choice.fits:
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
        claims[object_key(claim.pvc)] = assumed
        provisions.append(Provision(claim.pvc, assumed))
    after = replace(objects, persistent_volumes=pvs, persistent_volume_claims=claims)
    return PodVolumes(node.name, tuple(bindings), tuple(provisions), after)


__all__ = [
    "ANN_BOUND_BY_CONTROLLER",
    "PodVolumes",
    "Provision",
    "ScheduledWithVolumes",
    "StaticBinding",
    "VolumeBindingError",
    "assume_pod_volumes",
    "bind_volume_to_claim",
    "binds_volumes",
    "claim_ref",
    "object_key",
    "with_volumes",
]
