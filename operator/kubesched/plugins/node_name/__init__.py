"""NodeName (kube-scheduler 1.20 pkg/scheduler/framework/plugins/nodename/).

Predicate HostName: a pod naming a node in spec.nodeName fits that node only.

Reason: ERR_REASON_HOSTNAME (no eviction helps).
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, register
from kubesched.plugins.node_name.filtering import (
    ERR_REASON_HOSTNAME,
    HostName,
)

register(
    predicate(
        HostName, order=3, framework="NodeName", summary="A pod with `spec.nodeName` fits that node only."
    ),
)

__all__ = [
    "ERR_REASON_HOSTNAME",
    "HostName",
]
