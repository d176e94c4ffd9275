"""NoVolumeZoneConflict (plugin VolumeZone): a bound PV's zone and region labels against the node's.

The pod's claims are resolved once per cycle in `prefilter`. As in 1.20 a node without zone or
region labels always fits, and a claim that cannot be resolved (missing PVC, PV or storage
class) is only reported on nodes that do have them. kube-scheduler aborts the whole cycle with
that error; here it is the node's reason, so the pod's FitError says what is missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.model.nodeinfo import ClusterObjects, NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.plugins.framework import FITS, SKIP, Predicate
from kubesched.plugins.helper import storage_class_name

ERR_REASON_VOLUME_ZONE = "node(s) had no available volume zone"

VOLUME_ZONE_LABELS = frozenset(
    {
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
    }
)
_WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
_MULTI_ZONE_DELIMITER = "__"


@dataclass(frozen=True, slots=True)
class ClaimZones:
    """One claim: the error resolving it, or its PV's zone labels as sets of allowed values."""

    error: str | None
    zones: tuple[tuple[str, frozenset[str]], ...] = ()


def label_zones_to_set(value: str) -> frozenset[str] | None:
    """volumehelpers.LabelZonesToSet; None where it fails (1.20 then ignores the label)."""
    zones = [z.strip() for z in value.split(_MULTI_ZONE_DELIMITER)]
    return None if any(not z for z in zones) else frozenset(zones)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _claim_zones(claim_name: str, namespace: str, objects: ClusterObjects) -> ClaimZones | None:
    """Resolve one claim; None when it does not constrain the node (WaitForFirstConsumer, unbound)."""
    if not claim_name:
        return ClaimZones("PersistentVolumeClaim had no name")
    pvc = objects.persistent_volume_claims.get(f"{namespace}/{claim_name}")
    if pvc is None:
        return ClaimZones(f'persistentvolumeclaim "{claim_name}" not found')
    spec = pvc.get("spec") or {}
    pv_name = spec.get("volumeName") or ""
    if not pv_name:
        class_name = storage_class_name(pvc)
        if not class_name:
            return ClaimZones("PersistentVolumeClaim had no pv name and storageClass name")
        storage_class = objects.storage_classes.get(class_name)
        if storage_class is None:
            return ClaimZones(
                f'StorageClass "{class_name}" claimed by PersistentVolumeClaim "{claim_name}" not found'
            )
        mode = storage_class.get("volumeBindingMode")
        if not mode:
            return ClaimZones(f'VolumeBindingMode not set for StorageClass "{class_name}"')
        if mode == _WAIT_FOR_FIRST_CONSUMER:
            return None
        return ClaimZones("PersistentVolume had no name")
    pv = objects.persistent_volumes.get(pv_name)
    if pv is None:
        return ClaimZones(f'persistentvolume "{pv_name}" not found')
    zones = []
    for key, value in (_meta(pv).get("labels") or {}).items():
        if key in VOLUME_ZONE_LABELS:
            allowed = label_zones_to_set(str(value))
            if allowed is not None:
                zones.append((key, allowed))
    return ClaimZones(None, tuple(zones))


def pod_claim_zones(pod: Pod, objects: ClusterObjects) -> tuple[ClaimZones, ...]:
    claims = []
    for volume in pod.volumes:
        source = volume.get("persistentVolumeClaim") if isinstance(volume, Mapping) else None
        if source is None:
            continue
        resolved = _claim_zones(str(source.get("claimName") or ""), pod.namespace, objects)
        if resolved is not None:
            claims.append(resolved)
    return tuple(claims)


class NoVolumeZoneConflict(Predicate):
    name = "NoVolumeZoneConflict"
    unresolvable_reasons = frozenset({ERR_REASON_VOLUME_ZONE})
    requeue_on = frozenset({"PersistentVolume", "PersistentVolumeClaim", "StorageClass"})

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        return pod_claim_zones(pod, snapshot.objects) or SKIP

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        labels = node.node.labels
        constraints = {k: labels[k] for k in VOLUME_ZONE_LABELS if k in labels}
        if not constraints:
            return FITS
        for claim in state:
            if claim.error is not None:
                return (claim.error,)
            for key, allowed in claim.zones:
                if constraints.get(key, "") not in allowed:
                    return (ERR_REASON_VOLUME_ZONE,)
        return FITS
