"""Predicates by their legacy Policy name (kube-scheduler 1.20 `legacy_registry.go`).

Adding a predicate: its module here, one REGISTRY line and its place in ORDERING. A factory
takes the entry's argument (the object under its ARGUMENTS key, None for predicates that take
none) and returns the filters it enables; GeneralPredicates enables four. Factories raise
ArgumentError for an argument they cannot take.

A predicate with an `argument` may have any name (a "custom predicate" of the legacy Policy):
the argument's key says which filter it configures (ARGUMENTS). Names 1.20 no longer knows
(ORDERING_BEFORE_1_20) keep the semantics of the release that last had them; see their modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from kubesched.plugins.arguments import ArgumentError
from kubesched.plugins.framework import PluginSettings, Predicate
from kubesched.plugins.inter_pod_affinity.filtering import MatchInterPodAffinity
from kubesched.plugins.node_affinity.filtering import MatchNodeSelector
from kubesched.plugins.node_conditions.filtering import (
    CheckNodeCondition,
    CheckNodeDiskPressure,
    CheckNodeMemoryPressure,
    CheckNodePIDPressure,
)
from kubesched.plugins.node_label.filtering import CheckNodeLabelPresence
from kubesched.plugins.node_name.filtering import HostName
from kubesched.plugins.node_ports.filtering import PodFitsHostPorts
from kubesched.plugins.node_resources.fit import PodFitsResources
from kubesched.plugins.node_unschedulable.filtering import CheckNodeUnschedulable
from kubesched.plugins.node_validity.filtering import ValidNode
from kubesched.plugins.node_volume_limits.filtering import (
    MaxAzureDiskVolumeCount,
    MaxCinderVolumeCount,
    MaxCSIVolumeCount,
    MaxEBSVolumeCount,
    MaxGCEPDVolumeCount,
)
from kubesched.plugins.pod_topology_spread.filtering import EvenPodsSpread
from kubesched.plugins.service_affinity.filtering import CheckServiceAffinity
from kubesched.plugins.taint_toleration.filtering import (
    PodToleratesNodeNoExecuteTaints,
    PodToleratesNodeTaints,
)
from kubesched.plugins.volume_binding.filtering import CheckVolumeBinding
from kubesched.plugins.volume_restrictions.filtering import NoDiskConflict
from kubesched.plugins.volume_zone.filtering import NoVolumeZoneConflict

PredicateFactory = Callable[[Mapping[str, Any] | None, PluginSettings], tuple[Predicate, ...]]


def _no_argument(*classes: type[Predicate]) -> PredicateFactory:
    def factory(argument: Mapping[str, Any] | None, settings: PluginSettings) -> tuple[Predicate, ...]:
        if argument is not None:
            raise ArgumentError("", "this predicate takes no argument")
        return tuple(
            PodFitsResources(settings.ignored_resources) if cls is PodFitsResources else cls()
            for cls in classes
        )

    return factory


def _with_argument(build: Callable[[Mapping[str, Any]], Predicate], key: str) -> PredicateFactory:
    def factory(argument: Mapping[str, Any] | None, settings: PluginSettings) -> tuple[Predicate, ...]:
        if argument is None:
            raise ArgumentError("", f"this predicate needs an argument with {key}")
        if not isinstance(argument, Mapping):
            raise ArgumentError(key, f"must be an object, got {argument!r}")
        try:
            return (build(argument),)
        except ArgumentError as exc:
            raise ArgumentError(f"{key}.{exc.field}" if exc.field else key, exc.message) from exc

    return factory


REGISTRY: Final[Mapping[str, PredicateFactory]] = {
    "CheckNodeCondition": _no_argument(CheckNodeCondition),
    "CheckNodeUnschedulable": _no_argument(CheckNodeUnschedulable),
    "GeneralPredicates": _no_argument(PodFitsResources, HostName, PodFitsHostPorts, MatchNodeSelector),
    "HostName": _no_argument(HostName),
    "PodFitsHostPorts": _no_argument(PodFitsHostPorts),
    "MatchNodeSelector": _no_argument(MatchNodeSelector),
    "PodFitsResources": _no_argument(PodFitsResources),
    "NoDiskConflict": _no_argument(NoDiskConflict),
    "PodToleratesNodeTaints": _no_argument(PodToleratesNodeTaints),
    "PodToleratesNodeNoExecuteTaints": _no_argument(PodToleratesNodeNoExecuteTaints),
    "CheckNodeLabelPresence": _with_argument(CheckNodeLabelPresence.from_argument, "labelsPresence"),
    "CheckServiceAffinity": _with_argument(CheckServiceAffinity.from_argument, "serviceAffinity"),
    "MaxEBSVolumeCount": _no_argument(MaxEBSVolumeCount),
    "MaxGCEPDVolumeCount": _no_argument(MaxGCEPDVolumeCount),
    "MaxCSIVolumeCountPred": _no_argument(MaxCSIVolumeCount),
    "MaxAzureDiskVolumeCount": _no_argument(MaxAzureDiskVolumeCount),
    "MaxCinderVolumeCount": _no_argument(MaxCinderVolumeCount),
    "CheckVolumeBinding": _no_argument(CheckVolumeBinding),
    "NoVolumeZoneConflict": _no_argument(NoVolumeZoneConflict),
    "CheckNodeMemoryPressure": _no_argument(CheckNodeMemoryPressure),
    "CheckNodePIDPressure": _no_argument(CheckNodePIDPressure),
    "CheckNodeDiskPressure": _no_argument(CheckNodeDiskPressure),
    "EvenPodsSpread": _no_argument(EvenPodsSpread),
    "MatchInterPodAffinity": _no_argument(MatchInterPodAffinity),
}

# Old names kube-scheduler still accepts.
ALIASES: Final[Mapping[str, str]] = {"PodFitsPorts": "PodFitsHostPorts"}

# A custom predicate's argument key -> the predicate it configures.
ARGUMENTS: Final[Mapping[str, str]] = {
    "labelsPresence": "CheckNodeLabelPresence",
    "serviceAffinity": "CheckServiceAffinity",
}

# Always configured, whatever the policy says.
MANDATORY: Final = ("CheckNodeUnschedulable", "PodToleratesNodeTaints")

# predicateOrdering of 1.20: filters run in this order, whatever the order in the policy.
ORDERING_1_20: Final = (
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

# The order with the names 1.20 refuses put back where 1.16's predicatesOrdering had them.
ORDERING: Final = (
    "CheckNodeCondition",
    *ORDERING_1_20[:8],
    "PodToleratesNodeNoExecuteTaints",
    *ORDERING_1_20[8:17],
    "CheckNodeMemoryPressure",
    "CheckNodePIDPressure",
    "CheckNodeDiskPressure",
    *ORDERING_1_20[17:],
)
ORDERING_BEFORE_1_20: Final = tuple(name for name in ORDERING if name not in ORDERING_1_20)

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
DEFAULTS: Final = tuple(name for name in ORDERING if name in DEFAULTS_1_20)

__all__ = [
    "ALIASES",
    "ARGUMENTS",
    "DEFAULTS",
    "DEFAULTS_1_20",
    "MANDATORY",
    "ORDERING",
    "ORDERING_1_20",
    "ORDERING_BEFORE_1_20",
    "REGISTRY",
    "PredicateFactory",
    "ValidNode",
]
