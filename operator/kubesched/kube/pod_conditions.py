"""A condition on a pod, as the scheduler writes it: a strategic merge patch of its status."""

from __future__ import annotations

from typing import Any


def condition_patch(
    type_: str, status: str, reason: str, message: str, *, at: str, uid: str = ""
) -> dict[str, Any]:
    """Set the pod's condition `type_` (its transition at `at`, RFC 3339), for the status subresource.

    The strategic merge keys conditions on `type`, so the kubelet's other conditions stay. With
    `uid`, only that very pod is patched: a new pod of the same name is refused (its uid is
    immutable), as the kubelet's status patches (pkg/util/pod) use the uid as a precondition.
    """
    condition = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": at,
    }
    body: dict[str, Any] = {"status": {"conditions": [condition]}}
    if uid:
        body["metadata"] = {"uid": uid}
    return body
