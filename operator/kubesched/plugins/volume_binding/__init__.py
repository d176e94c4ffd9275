"""VolumeBinding (kube-scheduler 1.20 pkg/scheduler/framework/plugins/volumebinding/, with 1.32's
storage capacity check).

Predicate CheckVolumeBinding: the pod's claims bound, bindable or provisionable on the node (with
room there, when the CSI driver publishes its storage capacity).

Reasons (no eviction helps): ERR_REASON_BIND_CONFLICT, ERR_REASON_NODE_CONFLICT,
ERR_REASON_NOT_ENOUGH_SPACE, ERR_REASON_PV_NOT_EXIST, ERR_REASON_UNBOUND_IMMEDIATE.
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, register
from kubesched.plugins.volume_binding.filtering import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    ERR_REASON_UNBOUND_IMMEDIATE,
    CheckVolumeBinding,
)

register(
    predicate(
        CheckVolumeBinding,
        order=17,
        framework="VolumeBinding",
        default=True,
        summary=(
            "Bound claims' volumes accept the node; unbound ones can be bound or "
            "provisioned there (and are, before the pod is bound)."
        ),
    ),
)

__all__ = [
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_NOT_ENOUGH_SPACE",
    "ERR_REASON_PV_NOT_EXIST",
    "ERR_REASON_UNBOUND_IMMEDIATE",
    "CheckVolumeBinding",
]
