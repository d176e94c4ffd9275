"""NodeVolumeLimits, EBSLimits, GCEPDLimits, AzureDiskLimits, CinderLimits (kube-scheduler 1.20
pkg/scheduler/framework/plugins/nodevolumelimits/).

Predicates MaxCSIVolumeCountPred, MaxEBSVolumeCount, MaxGCEPDVolumeCount, MaxAzureDiskVolumeCount,
MaxCinderVolumeCount: how many volumes of a kind a node may have attached.

Reasons: ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED; ERR_REASON_CLAIM_WITHOUT_NAME on every node.
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, register
from kubesched.plugins.node_volume_limits.filtering import (
    ERR_REASON_CLAIM_WITHOUT_NAME,
    ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    MaxAzureDiskVolumeCount,
    MaxCinderVolumeCount,
    MaxCSIVolumeCount,
    MaxEBSVolumeCount,
    MaxGCEPDVolumeCount,
)

register(
    predicate(
        MaxEBSVolumeCount,
        order=12,
        framework="EBSLimits",
        default=True,
        summary="AWS EBS volumes on the node stay within its attach limit.",
    ),
    predicate(
        MaxGCEPDVolumeCount,
        order=13,
        framework="GCEPDLimits",
        default=True,
        summary="GCE persistent disks on the node stay within its attach limit.",
    ),
    predicate(
        MaxCSIVolumeCount,
        order=14,
        framework="NodeVolumeLimits",
        default=True,
        summary="CSI volumes per driver stay within the limits the node's CSINode reports.",
    ),
    predicate(
        MaxAzureDiskVolumeCount,
        order=15,
        framework="AzureDiskLimits",
        default=True,
        summary="Azure disks on the node stay within its attach limit.",
    ),
    predicate(
        MaxCinderVolumeCount,
        order=16,
        framework="CinderLimits",
        summary="Cinder volumes on the node stay within its attach limit.",
    ),
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
