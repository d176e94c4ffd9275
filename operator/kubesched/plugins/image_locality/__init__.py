"""ImageLocality (kube-scheduler 1.20 pkg/scheduler/framework/plugins/imagelocality/).

Priority ImageLocalityPriority: nodes that already have the pod's images, by size and spread.
"""

from __future__ import annotations

from kubesched.plugins.image_locality.scoring import ImageLocalityPriority

__all__ = ["ImageLocalityPriority"]
