"""ImageLocality (kube-scheduler 1.20 pkg/scheduler/framework/plugins/imagelocality/).

Priority ImageLocalityPriority: nodes that already have the pod's images, by size and spread.
"""

from __future__ import annotations

from kubesched.plugins.declare import priority, register
from kubesched.plugins.image_locality.scoring import ImageLocalityPriority

register(
    priority(
        ImageLocalityPriority,
        framework="ImageLocality",
        default_weight=1,
        summary="Favours nodes that already have the pod's images, by their size.",
    ),
)

__all__ = ["ImageLocalityPriority"]
