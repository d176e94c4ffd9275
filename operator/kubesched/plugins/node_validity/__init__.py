"""Nodes whose object does not parse: no kube-scheduler plugin (its typed client rejects such
objects before the scheduler sees them). The algorithm applies ValidNode to every node first.

Reason: ERR_REASON_INVALID_NODE (no eviction helps).
"""

from __future__ import annotations

from kubesched.plugins.node_validity.filtering import (
    ERR_REASON_INVALID_NODE,
    ValidNode,
)

__all__ = [
    "ERR_REASON_INVALID_NODE",
    "ValidNode",
]
