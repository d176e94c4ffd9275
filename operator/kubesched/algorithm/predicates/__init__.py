"""Predicates by their legacy Policy name (kube-scheduler 1.20 `legacy_registry.go`).

Adding a predicate: its module here, one REGISTRY line and, if 1.20 knows the name, its place
in ORDERING. A factory takes the policy entry's `argument` (None when absent) and returns the
filters it enables; GeneralPredicates enables four. Factories raise ValueError for an argument
they cannot take.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from kubesched.algorithm.framework import Predicate
from kubesched.algorithm.predicates.node_affinity import MatchNodeSelector
from kubesched.algorithm.predicates.node_name import HostName
from kubesched.algorithm.predicates.node_ports import PodFitsHostPorts
from kubesched.algorithm.predicates.node_resources import PodFitsResources
from kubesched.algorithm.predicates.node_unschedulable import CheckNodeUnschedulable
from kubesched.algorithm.predicates.node_validity import ValidNode
from kubesched.algorithm.predicates.taint_toleration import PodToleratesNodeTaints
from kubesched.algorithm.predicates.volume_restrictions import NoDiskConflict
from kubesched.algorithm.predicates.volume_zone import NoVolumeZoneConflict

PredicateFactory = Callable[[Mapping[str, Any] | None], tuple[Predicate, ...]]


def _no_argument(*classes: type[Predicate]) -> PredicateFactory:
    def factory(argument: Mapping[str, Any] | None) -> tuple[Predicate, ...]:
        if argument is not None:
            raise ValueError("this predicate takes no argument")
        return tuple(cls() for cls in classes)

    return factory


REGISTRY: Final[Mapping[str, PredicateFactory]] = {
    "CheckNodeUnschedulable": _no_argument(CheckNodeUnschedulable),
    "GeneralPredicates": _no_argument(PodFitsResources, HostName, PodFitsHostPorts, MatchNodeSelector),
    "HostName": _no_argument(HostName),
    "PodFitsHostPorts": _no_argument(PodFitsHostPorts),
    "MatchNodeSelector": _no_argument(MatchNodeSelector),
    "PodFitsResources": _no_argument(PodFitsResources),
    "NoDiskConflict": _no_argument(NoDiskConflict),
    "PodToleratesNodeTaints": _no_argument(PodToleratesNodeTaints),
    "NoVolumeZoneConflict": _no_argument(NoVolumeZoneConflict),
}

# Old names kube-scheduler still accepts.
ALIASES: Final[Mapping[str, str]] = {"PodFitsPorts": "PodFitsHostPorts"}

# Always configured, whatever the policy says.
MANDATORY: Final = ("CheckNodeUnschedulable", "PodToleratesNodeTaints")

# predicateOrdering: filters run in this order, whatever the order in the policy.
ORDERING: Final = (
    "CheckNodeUnschedulable",
    "GeneralPredicates",
    "HostName",
    "PodFitsHostPorts",
    "MatchNodeSelector",
    "PodFitsResources",
    "NoDiskConflict",
    "PodToleratesNodeTaints",
    "CheckNodeLabelPresence",
    "CheckServiceAffinity",
    "MaxEBSVolumeCount",
    "MaxGCEPDVolumeCount",
    "MaxCSIVolumeCountPred",
    "MaxAzureDiskVolumeCount",
    "MaxCinderVolumeCount",
    "CheckVolumeBinding",
    "NoVolumeZoneConflict",
    "EvenPodsSpread",
    "MatchInterPodAffinity",
)

# LegacyRegistry.DefaultPredicates: used when a policy has no `predicates` field.
DEFAULTS_1_20: Final = frozenset(
    {
        "NoVolumeZoneConflict",
        "MaxEBSVolumeCount",
        "MaxGCEPDVolumeCount",
        "MaxAzureDiskVolumeCount",
        "MaxCSIVolumeCountPred",
        "MatchInterPodAffinity",
        "NoDiskConflict",
        "GeneralPredicates",
        "PodToleratesNodeTaints",
        "CheckVolumeBinding",
        "CheckNodeUnschedulable",
        "EvenPodsSpread",
    }
)
DEFAULTS: Final = tuple(name for name in ORDERING if name in DEFAULTS_1_20 and name in REGISTRY)

# Names kube-scheduler 1.20 knows that have no implementation here yet.
NOT_SUPPORTED_YET: Final = frozenset(name for name in ORDERING if name not in REGISTRY)

__all__ = [
    "ALIASES",
    "DEFAULTS",
    "DEFAULTS_1_20",
    "MANDATORY",
    "NOT_SUPPORTED_YET",
    "ORDERING",
    "REGISTRY",
    "PredicateFactory",
    "ValidNode",
]
