"""NodePorts (kube-scheduler 1.20 pkg/scheduler/framework/plugins/nodeports/).

Predicate PodFitsHostPorts, alias PodFitsPorts: host ports already in use on the node.

Reason: ERR_REASON_PORTS.
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, register
from kubesched.plugins.node_ports.filtering import (
    ERR_REASON_PORTS,
    PodFitsHostPorts,
)

register(
    predicate(
        PodFitsHostPorts,
        order=4,
        aliases=("PodFitsPorts",),
        framework="NodePorts",
        summary="No host port of the pod is taken on the node.",
    ),
)

__all__ = [
    "ERR_REASON_PORTS",
    "PodFitsHostPorts",
]
