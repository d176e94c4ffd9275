"""VolumeRestrictions (kube-scheduler 1.20 pkg/scheduler/framework/plugins/volumerestrictions/,
with 1.32's ReadWriteOncePod check).

Predicate NoDiskConflict: a GCE PD, EBS, iSCSI or RBD disk already mounted on the node; a
ReadWriteOncePod claim already used by another pod.

Reasons: ERR_REASON_DISK_CONFLICT, ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT (both resolvable by
preemption); a claim with no PVC is left to CheckVolumeBinding, as in 1.20.
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, register
from kubesched.plugins.volume_restrictions.filtering import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
    NoDiskConflict,
)

register(
    predicate(
        NoDiskConflict,
        order=7,
        framework="VolumeRestrictions",
        default=True,
        summary=(
            "No GCE PD, EBS, iSCSI or RBD disk of the pod is already mounted on the "
            "node in a conflicting way."
        ),
    ),
)

__all__ = [
    "ERR_REASON_DISK_CONFLICT",
    "ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT",
    "NoDiskConflict",
]
