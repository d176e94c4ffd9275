"""MaxEBSVolumeCount, MaxGCEPDVolumeCount, MaxAzureDiskVolumeCount, MaxCinderVolumeCount and
MaxCSIVolumeCountPred (plugins EBSLimits, GCEPDLimits, AzureDiskLimits, CinderLimits,
NodeVolumeLimits): how many volumes of a kind a node may have attached.

In-tree kinds count the unique disks of the pod plus those of the pods on the node against the
node's `attachable-volumes-<kind>` allocatable, else a default (EBS 39, or 25 on Nitro instance
types; GCE PD 16; Azure Disk 16; Cinder 256), else $KUBE_MAX_PD_VOLS when set. A claim counts
when its PV is of that kind, or, unbound or with its PV missing, when its StorageClass provisions
that kind. CSI volumes count per driver against the node's CSINode `allocatable.count` (or its
`attachable-volumes-csi-<driver>` allocatable). As in 1.20 with its default feature gates (every
CSIMigration<Cloud> gate off), no in-tree volume is ever treated as migrated to CSI.

A claim without a name makes every node fail with "PersistentVolumeClaim had no name"
(kube-scheduler aborts the cycle with that error).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from kubesched.model.nodeinfo import ClusterObjects, NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.plugins.framework import FITS, SKIP, PluginSettings, Predicate, Reject
from kubesched.plugins.helper import storage_class_name

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
ERR_REASON_CLAIM_WITHOUT_NAME = "PersistentVolumeClaim had no name"

KUBE_MAX_PD_VOLS = "KUBE_MAX_PD_VOLS"
ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"
CSI_ATTACH_LIMIT_PREFIX = "attachable-volumes-csi-"
RESOURCE_NAME_LENGTH_LIMIT = 63
EBS_NITRO_LIMIT_REGEX = re.compile(r"^[cmr]5.*|t3|z1d")
DEFAULT_MAX_EBS_VOLUMES = 39
DEFAULT_MAX_EBS_NITRO_VOLUMES = 25
DEFAULT_MAX_GCE_PD_VOLUMES = 16
DEFAULT_MAX_AZURE_DISK_VOLUMES = 16
DEFAULT_MAX_CINDER_VOLUMES = 256
INSTANCE_TYPE_LABELS = ("beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type")

# csi-translation-lib: provisioners of in-tree plugins that could migrate to CSI. With migration
# off, CSI limits never count their volumes.
MIGRATABLE_IN_TREE_PLUGINS = frozenset(
    {
        "kubernetes.io/aws-ebs",
        "kubernetes.io/gce-pd",
        "kubernetes.io/azure-disk",
        "kubernetes.io/azure-file",
        "kubernetes.io/cinder",
        "kubernetes.io/vsphere-volume",
    }
)


def csi_attach_limit_key(driver: str) -> str:
    """volumeutil.GetCSIAttachLimitKey: long driver names are cut and suffixed with a hash."""
    if len(CSI_ATTACH_LIMIT_PREFIX) + len(driver) >= RESOURCE_NAME_LENGTH_LIMIT:
        digest = hashlib.sha1(driver.encode(), usedforsecurity=False).hexdigest()[:16]
        return CSI_ATTACH_LIMIT_PREFIX + driver[:23] + digest
    return CSI_ATTACH_LIMIT_PREFIX + driver


def node_volume_limits(node: NodeInfo) -> dict[str, int]:
    """volumeLimits: the node's attachable-volumes-* allocatable."""
    return {k: v for k, v in node.node.allocatable.scalar.items() if k.startswith(ATTACHABLE_VOLUMES_PREFIX)}


def _claim(volume: Mapping[str, Any]) -> str | None:
    source = volume.get("persistentVolumeClaim") if isinstance(volume, Mapping) else None
    if not isinstance(source, Mapping):
        return None
    return str(source.get("claimName") or "")


def _pod_claims(
    pod: Pod, objects: ClusterObjects
) -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any] | None]]:
    """The pod's claims that exist: (name, PVC, its PV, None when unbound or missing).

    An unknown claim is not counted: nothing says what kind of volume it is.
    """
    for volume in pod.volumes:
        claim_name = _claim(volume)
        if not claim_name:
            continue
        pvc = objects.persistent_volume_claims.get(f"{pod.namespace}/{claim_name}")
        if pvc is None:
            continue
        pv_name = (pvc.get("spec") or {}).get("volumeName") or ""
        yield claim_name, pvc, objects.persistent_volumes.get(pv_name) if pv_name else None


@dataclass(frozen=True, slots=True)
class InTreeKind:
    """One in-tree volume plugin: the field of its volume source, the field of its disk id."""

    source: str
    id_field: str
    provisioner: str
    limit_key: str
    default_max: Callable[[Mapping[str, str]], int]


def _max_ebs(labels: Mapping[str, str]) -> int:
    instance_type = next((labels[k] for k in INSTANCE_TYPE_LABELS if k in labels), "")
    if EBS_NITRO_LIMIT_REGEX.search(instance_type):
        return DEFAULT_MAX_EBS_NITRO_VOLUMES
    return DEFAULT_MAX_EBS_VOLUMES


EBS = InTreeKind(
    "awsElasticBlockStore",
    "volumeID",
    "kubernetes.io/aws-ebs",
    "attachable-volumes-aws-ebs",
    _max_ebs,
)
GCE_PD = InTreeKind(
    "gcePersistentDisk",
    "pdName",
    "kubernetes.io/gce-pd",
    "attachable-volumes-gce-pd",
    lambda _: DEFAULT_MAX_GCE_PD_VOLUMES,
)
AZURE_DISK = InTreeKind(
    "azureDisk",
    "diskName",
    "kubernetes.io/azure-disk",
    "attachable-volumes-azure-disk",
    lambda _: DEFAULT_MAX_AZURE_DISK_VOLUMES,
)
CINDER = InTreeKind(
    "cinder",
    "volumeID",
    "kubernetes.io/cinder",
    "attachable-volumes-cinder",
    lambda _: DEFAULT_MAX_CINDER_VOLUMES,
)


class _VolumeCounter(Predicate):
    """What the in-tree and CSI limits share: the pod's counted volumes, the node's, the limit."""

    def __init__(self) -> None:
        # Stands for a claim whose volume is not known yet, so it can never equal a real disk id.
        self._prefix = secrets.token_hex(16)

    def volumes(self, pod: Pod, objects: ClusterObjects) -> dict[str, str]:
        """The volumes of `pod` this limit counts: unique id -> limit key."""
        raise NotImplementedError

    def placeholder(self, namespace: str, claim_name: str) -> str:
        """The id of a claim whose volume is not known yet."""
        return f"{self._prefix}-{namespace}/{claim_name}"

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        if not pod.volumes:
            return SKIP
        if any(_claim(v) == "" for v in pod.volumes):
            return Reject((ERR_REASON_CLAIM_WITHOUT_NAME,))
        new = self.volumes(pod, snapshot.objects)
        return (new, snapshot.objects) if new else SKIP

    def attached(self, node: NodeInfo, objects: ClusterObjects) -> dict[str, str]:
        found: dict[str, str] = {}
        for other in node.pods.values():
            if other.volumes:
                found.update(self.volumes(other, objects))
        return found


class MaxInTreeVolumeCount(_VolumeCounter):
    """nonCSILimits for one in-tree kind."""

    kind: ClassVar[InTreeKind]
    requeue_on = frozenset({"PersistentVolume", "PersistentVolumeClaim", "StorageClass"})

    def __init__(self, max_pd_volumes: int = -1) -> None:
        super().__init__()
        self.env_max = max_pd_volumes

    @classmethod
    def from_settings(cls, settings: PluginSettings) -> Predicate:
        return cls(settings.max_pd_volumes)

    def _matches_provisioner(self, pvc: Mapping[str, Any], objects: ClusterObjects) -> bool:
        """matchProvisioner: spec.storageClassName's class provisions this kind (no beta annotation)."""
        class_name = (pvc.get("spec") or {}).get("storageClassName")
        if class_name is None:
            return False
        storage_class = objects.storage_classes.get(str(class_name))
        return storage_class is not None and storage_class.get("provisioner") == self.kind.provisioner

    def volumes(self, pod: Pod, objects: ClusterObjects) -> dict[str, str]:
        kind = self.kind
        found: dict[str, str] = {}
        for volume in pod.volumes:
            source = volume.get(kind.source) if isinstance(volume, Mapping) else None
            if isinstance(source, Mapping):
                found[str(source.get(kind.id_field) or "")] = kind.limit_key
        for claim_name, pvc, pv in _pod_claims(pod, objects):
            if pv is None:
                if self._matches_provisioner(pvc, objects):
                    found[self.placeholder(pod.namespace, claim_name)] = kind.limit_key
                continue
            pv_source = (pv.get("spec") or {}).get(kind.source)
            if isinstance(pv_source, Mapping):
                found[str(pv_source.get(kind.id_field) or "")] = kind.limit_key
        return found

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        new, objects = state
        existing = self.attached(node, objects)
        new_count = sum(1 for v in new if v not in existing)
        limit = self.env_max if self.env_max > 0 else self.kind.default_max(node.node.labels)
        limit = node_volume_limits(node).get(self.kind.limit_key, limit)
        if len(existing) + new_count > limit:
            return (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,)
        return FITS


class MaxEBSVolumeCount(MaxInTreeVolumeCount):
    name = "MaxEBSVolumeCount"
    kind = EBS


class MaxGCEPDVolumeCount(MaxInTreeVolumeCount):
    name = "MaxGCEPDVolumeCount"
    kind = GCE_PD


class MaxAzureDiskVolumeCount(MaxInTreeVolumeCount):
    name = "MaxAzureDiskVolumeCount"
    kind = AZURE_DISK


class MaxCinderVolumeCount(MaxInTreeVolumeCount):
    name = "MaxCinderVolumeCount"
    kind = CINDER


class MaxCSIVolumeCount(_VolumeCounter):
    """CSILimits: volumes per CSI driver against the node's limits for that driver."""

    name = "MaxCSIVolumeCountPred"
    requeue_on = frozenset({"PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode"})

    def _driver_and_handle(
        self,
        namespace: str,
        claim_name: str,
        pvc: Mapping[str, Any],
        pv: Mapping[str, Any] | None,
        objects: ClusterObjects,
    ) -> tuple[str, str]:
        """getCSIDriverInfo: the PV's CSI driver and handle, else the class's provisioner."""
        if pv is not None:
            csi = (pv.get("spec") or {}).get("csi")
            if not isinstance(csi, Mapping):
                return "", ""  # in-tree, and never migrated with 1.20's default gates
            return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")
        class_name = storage_class_name(pvc)
        storage_class = objects.storage_classes.get(class_name) if class_name else None
        if storage_class is None:
            return "", ""
        provisioner = str(storage_class.get("provisioner") or "")
        if provisioner in MIGRATABLE_IN_TREE_PLUGINS:
            return "", ""
        return provisioner, self.placeholder(namespace, claim_name)

    def volumes(self, pod: Pod, objects: ClusterObjects) -> dict[str, str]:
        found: dict[str, str] = {}
        for claim_name, pvc, pv in _pod_claims(pod, objects):
            driver, handle = self._driver_and_handle(pod.namespace, claim_name, pvc, pv, objects)
            if driver and handle:
                found[f"{driver}/{handle}"] = csi_attach_limit_key(driver)
        return found

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        new, objects = state
        limits = node_volume_limits(node)
        csi_node = objects.csi_nodes.get(node.name)
        if csi_node is not None:
            for driver in (csi_node.get("spec") or {}).get("drivers") or ():
                count = ((driver or {}).get("allocatable") or {}).get("count")
                if isinstance(count, int) and not isinstance(count, bool):
                    limits[csi_attach_limit_key(str(driver.get("name") or ""))] = count
        if not limits:
            return FITS
        attached = self.attached(node, objects)
        attached_count: dict[str, int] = {}
        for key in attached.values():
            attached_count[key] = attached_count.get(key, 0) + 1
        new_count: dict[str, int] = {}
        for volume, key in new.items():
            if volume not in attached:
                new_count[key] = new_count.get(key, 0) + 1
        for key, count in new_count.items():
            limit = limits.get(key)
            if limit is not None and attached_count.get(key, 0) + count > limit:
                return (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,)
        return FITS
