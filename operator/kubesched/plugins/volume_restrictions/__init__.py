"""VolumeRestrictions (kube-scheduler 1.20 pkg/scheduler/framework/plugins/volumerestrictions/).

Predicate NoDiskConflict: a GCE PD, EBS, iSCSI or RBD disk already mounted on the node.

Reason: ERR_REASON_DISK_CONFLICT.
"""

from __future__ import annotations

from kubesched.plugins.volume_restrictions.filtering import (
    ERR_REASON_DISK_CONFLICT,
    NoDiskConflict,
)

__all__ = [
    "ERR_REASON_DISK_CONFLICT",
    "NoDiskConflict",
]
