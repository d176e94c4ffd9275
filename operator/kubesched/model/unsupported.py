"""Pod fields of newer Kubernetes releases that change where a pod may go and that kubesched does not
implement: a pod that uses one is refused (never bound) with a message naming the field, rather
than placed as if the field were absent.

The fields kubesched does implement (schedulingGates, restartable init containers, the newer
topology spread and pod affinity fields) are not listed here. Fields kube-scheduler 1.32 itself
does not schedule by (`spec.os`, `spec.hostUsers`) are not refused either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final


def _containers(spec: Mapping[str, Any]) -> list[Any]:
    return [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]


def _container_claims(spec: Mapping[str, Any]) -> bool:
    return any(
        isinstance(c, Mapping) and isinstance(c.get("resources"), Mapping) and c["resources"].get("claims")
        for c in _containers(spec)
    )


def _ephemeral_volumes(spec: Mapping[str, Any]) -> bool:
    return any(isinstance(v, Mapping) and v.get("ephemeral") for v in spec.get("volumes") or ())


@dataclass(frozen=True, slots=True)
class UnsupportedField:
    """A pod field kubesched refuses: its path, what it is for, and whether a pod spec uses it."""

    path: str
    feature: str
    used: Callable[[Mapping[str, Any]], bool]

    @property
    def label(self) -> str:
        return f"{self.path} ({self.feature})"


UNSUPPORTED_FIELDS: Final[tuple[UnsupportedField, ...]] = (
    # DynamicResources (beta in 1.32): claims are allocated on a node by the scheduler itself.
    UnsupportedField(
        "spec.resourceClaims", "dynamic resource allocation", lambda spec: bool(spec.get("resourceClaims"))
    ),
    UnsupportedField("spec.containers[*].resources.claims", "dynamic resource allocation", _container_claims),
    # PodLevelResources (alpha in 1.32): the pod's requests replace the sum of its containers'.
    UnsupportedField("spec.resources", "pod-level resources", lambda spec: bool(spec.get("resources"))),
    # Generic ephemeral volumes (GA in 1.23): VolumeBinding waits for, then places by, their claims.
    UnsupportedField("spec.volumes[*].ephemeral", "generic ephemeral volumes", _ephemeral_volumes),
)

NOT_IMPLEMENTED = "which kubesched does not implement"


def unsupported_fields(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The labels of the refused fields `spec` uses, in the table's order."""
    return tuple(field.label for field in UNSUPPORTED_FIELDS if field.used(spec))


def refusal(labels: tuple[str, ...]) -> str:
    """What is wrong with a pod using these fields, after "pod has": they and why they stop it."""
    joined = labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} and {labels[-1]}"
    return f"{joined}, {NOT_IMPLEMENTED}"
