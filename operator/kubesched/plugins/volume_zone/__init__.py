"""VolumeZone (kube-scheduler 1.20 pkg/scheduler/framework/plugins/volumezone/).

Predicate NoVolumeZoneConflict: a bound PV's zone and region labels against the node's.

Reason: ERR_REASON_VOLUME_ZONE (no eviction helps); a claim that cannot be resolved names what is missing.
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, register
from kubesched.plugins.volume_zone.filtering import (
    ERR_REASON_VOLUME_ZONE,
    NoVolumeZoneConflict,
)

register(
    predicate(
        NoVolumeZoneConflict,
        order=18,
        framework="VolumeZone",
        default=True,
        summary="The zone and region of the pod's bound volumes match the node's.",
    ),
)

__all__ = [
    "ERR_REASON_VOLUME_ZONE",
    "NoVolumeZoneConflict",
]
