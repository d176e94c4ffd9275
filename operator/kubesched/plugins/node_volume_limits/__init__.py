"""NodeVolumeLimits, EBSLimits, GCEPDLimits, AzureDiskLimits, CinderLimits (kube-scheduler 1.20
pkg/scheduler/framework/plugins/nodevolumelimits/).

Predicates MaxCSIVolumeCountPred, MaxEBSVolumeCount, MaxGCEPDVolumeCount, MaxAzureDiskVolumeCount,
MaxCinderVolumeCount: how many volumes of a kind a node may have attached.

Reasons: ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED; ERR_REASON_CLAIM_WITHOUT_NAME on every node.
"""

from __future__ import annotations

from kubesched.plugins.node_volume_limits.filtering import (
    ERR_REASON_CLAIM_WITHOUT_NAME,
    ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    MaxAzureDiskVolumeCount,
    MaxCinderVolumeCount,
    MaxCSIVolumeCount,
    MaxEBSVolumeCount,
    MaxGCEPDVolumeCount,
)

__all__ = [
    "ERR_REASON_CLAIM_WITHOUT_NAME",
    "ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED",
    "MaxAzureDiskVolumeCount",
    "MaxCSIVolumeCount",
    "MaxCinderVolumeCount",
    "MaxEBSVolumeCount",
    "MaxGCEPDVolumeCount",
]
