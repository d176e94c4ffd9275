"""Storage capacity tracking (storage.k8s.io, GA in Kubernetes 1.24) as kube-scheduler 1.32's volume
binder reads it (volumebinding/binder.go): a CSIDriver with `spec.storageCapacity: true` publishes
CSIStorageCapacity objects, each saying how large a volume of one StorageClass it can create for
the nodes its `nodeTopology` selects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.model.quantity import QuantityError, parse_quantity, value
from kubesched.model.selectors import NOTHING, LabelSelector, SelectorError


@dataclass(frozen=True, slots=True)
class StorageCapacity:
    """One CSIStorageCapacity: the largest volume of `storage_class` it offers, and to which nodes."""

    storage_class: str
    limit: int | None  # bytes; None: unknown, so no volume fits
    node_topology: LabelSelector

    def offers(self, size: int) -> bool:
        """capacitySufficient: a volume of `size` bytes fits within the limit."""
        return self.limit is not None and self.limit >= size

    def reaches(self, labels: Mapping[str, str]) -> bool:
        """nodeHasAccess: the node's labels match the topology."""
        return self.node_topology.matches(labels)


def capacity_from_dict(obj: Mapping[str, Any]) -> StorageCapacity:
    """A CSIStorageCapacity (v1 or v1beta1: the same fields). The API server validates both fields;
    from a hand-written snapshot, a malformed limit offers nothing and a malformed topology reaches
    no node, as a selector that fails to convert does in binder.go."""
    # maximumVolumeSize, when set, is the more precise limit (capacitySufficient).
    raw = obj.get("maximumVolumeSize")
    if raw is None:
        raw = obj.get("capacity")
    limit = None
    if raw is not None:
        try:
            limit = value(parse_quantity(raw))
        except QuantityError:
            limit = None
    try:
        # A nil nodeTopology parses to NOTHING: no node has access.
        topology = LabelSelector.parse(obj.get("nodeTopology"))
    except SelectorError:
        topology = NOTHING
    return StorageCapacity(str(obj.get("storageClassName") or ""), limit, topology)


def tracks_capacity(driver: Mapping[str, Any] | None) -> bool:
    """Whether a CSIDriver opts into capacity checks: only `spec.storageCapacity: true` does; no
    driver of that name (not a CSI provisioner), or the field absent or false, means no check."""
    return driver is not None and (driver.get("spec") or {}).get("storageCapacity") is True
