"""NodePorts (kube-scheduler 1.20 pkg/scheduler/framework/plugins/nodeports/).

Predicate PodFitsHostPorts, alias PodFitsPorts: host ports already in use on the node.

Reason: ERR_REASON_PORTS.
"""

from __future__ import annotations

from kubesched.plugins.node_ports.filtering import (
    ERR_REASON_PORTS,
    PodFitsHostPorts,
)

__all__ = [
    "ERR_REASON_PORTS",
    "PodFitsHostPorts",
]
