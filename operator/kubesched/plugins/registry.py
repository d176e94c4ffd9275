"""Predicates and priorities by their legacy Policy name (kube-scheduler 1.20 `legacy_registry.go`),
and the traits the predicates declare, gathered for preemption and the scheduling queue.

Adding a plugin: its folder, then one line in PREDICATES or PRIORITIES (and, for a predicate, its
place in PREDICATE_ORDERING). A factory takes the entry's argument (the object under the factory's
`argument_key`, None for plugins that take none) and the policy-wide PluginSettings; it builds the
plugin with `from_settings` or `from_argument` and raises ArgumentError for an argument it cannot
take. A predicate factory may enable several filters (GeneralPredicates enables four). The weight is
the policy's business; priorities that share a 1.20 plugin are combined by the policy compiler
(Priority.plugin, merge, weight_rule).

An entry with an `argument` may have any name (a "custom predicate" or "custom priority" of the
legacy Policy): the argument's key says what it configures (PREDICATE_ARGUMENTS,
PRIORITY_ARGUMENTS). Names 1.20 no longer knows (PREDICATE_ORDERING_BEFORE_1_20,
ResourceLimitsPriority) keep the semantics of the release that last had them; see their modules.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from kubesched.plugins.arguments import ArgumentError, in_context
from kubesched.plugins.framework import PluginSettings, Predicate, Priority
from kubesched.plugins.image_locality import ImageLocalityPriority
from kubesched.plugins.inter_pod_affinity import InterPodAffinityPriority, MatchInterPodAffinity
from kubesched.plugins.node_affinity import MatchNodeSelector, NodeAffinityPriority
from kubesched.plugins.node_conditions import (
    CheckNodeCondition,
    CheckNodeDiskPressure,
    CheckNodeMemoryPressure,
    CheckNodePIDPressure,
)
from kubesched.plugins.node_label import CheckNodeLabelPresence, NodeLabelPriority
from kubesched.plugins.node_name import HostName
from kubesched.plugins.node_ports import PodFitsHostPorts
from kubesched.plugins.node_prefer_avoid_pods import NodePreferAvoidPodsPriority
from kubesched.plugins.node_resources import (
    BalancedResourceAllocation,
    LeastRequestedPriority,
    MostRequestedPriority,
    PodFitsResources,
    RequestedToCapacityRatioPriority,
    ResourceLimitsPriority,
)
from kubesched.plugins.node_unschedulable import CheckNodeUnschedulable
from kubesched.plugins.node_validity import ValidNode
from kubesched.plugins.node_volume_limits import (
    MaxAzureDiskVolumeCount,
    MaxCinderVolumeCount,
    MaxCSIVolumeCount,
    MaxEBSVolumeCount,
    MaxGCEPDVolumeCount,
)
from kubesched.plugins.pod_topology_spread import EvenPodsSpread, PodTopologySpreadPriority
from kubesched.plugins.selector_spread import SelectorSpreadPriority
from kubesched.plugins.service_affinity import CheckServiceAffinity, ServiceAntiAffinityPriority
from kubesched.plugins.taint_toleration import (
    PodToleratesNodeNoExecuteTaints,
    PodToleratesNodeTaints,
    TaintTolerationPriority,
)
from kubesched.plugins.volume_binding import CheckVolumeBinding
from kubesched.plugins.volume_restrictions import NoDiskConflict
from kubesched.plugins.volume_zone import NoVolumeZoneConflict


def _checked(kind: str, key: str, argument: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The entry's argument: None for a plugin that takes none, an object for one that needs it."""
    if not key:
        if argument is not None:
            raise ArgumentError("", f"this {kind} takes no argument")
        return None
    if argument is None:
        raise ArgumentError("", f"this {kind} needs an argument with {key}")
    if not isinstance(argument, Mapping):
        raise ArgumentError(key, f"must be an object, got {argument!r}")
    return argument


@contextmanager
def _under(key: str) -> Iterator[None]:
    """Errors in an argument name their field under the argument's key."""
    try:
        yield
    except ArgumentError as exc:
        raise in_context(key, exc) from exc


@dataclass(frozen=True, slots=True)
class PredicateFactory:
    """The filters one policy entry enables; `argument_key` is set when it needs an argument."""

    classes: tuple[type[Predicate], ...]
    argument_key: str = ""

    def __call__(self, argument: Mapping[str, Any] | None, settings: PluginSettings) -> tuple[Predicate, ...]:
        checked = _checked("predicate", self.argument_key, argument)
        if checked is None:
            return tuple(cls.from_settings(settings) for cls in self.classes)
        with _under(self.argument_key):
            return tuple(cls.from_argument(checked) for cls in self.classes)


@dataclass(frozen=True, slots=True)
class PriorityFactory:
    """The priority one policy entry configures; `argument_key` is set when it needs an argument."""

    cls: type[Priority]
    argument_key: str = ""

    def __call__(self, argument: Mapping[str, Any] | None, settings: PluginSettings) -> Priority:
        checked = _checked("priority", self.argument_key, argument)
        if checked is None:
            return self.cls.from_settings(settings)
        with _under(self.argument_key):
            return self.cls.from_argument(checked)


def _plain(*classes: type[Predicate]) -> PredicateFactory:
    return PredicateFactory(classes)


# ----------------------------------------------------------------------------------- predicates

PREDICATES: Final[Mapping[str, PredicateFactory]] = {
    "CheckNodeCondition": _plain(CheckNodeCondition),
    "CheckNodeUnschedulable": _plain(CheckNodeUnschedulable),
    "GeneralPredicates": _plain(PodFitsResources, HostName, PodFitsHostPorts, MatchNodeSelector),
    "HostName": _plain(HostName),
    "PodFitsHostPorts": _plain(PodFitsHostPorts),
    "MatchNodeSelector": _plain(MatchNodeSelector),
    "PodFitsResources": _plain(PodFitsResources),
    "NoDiskConflict": _plain(NoDiskConflict),
    "PodToleratesNodeTaints": _plain(PodToleratesNodeTaints),
    "PodToleratesNodeNoExecuteTaints": _plain(PodToleratesNodeNoExecuteTaints),
    "CheckNodeLabelPresence": PredicateFactory((CheckNodeLabelPresence,), "labelsPresence"),
    "CheckServiceAffinity": PredicateFactory((CheckServiceAffinity,), "serviceAffinity"),
    "MaxEBSVolumeCount": _plain(MaxEBSVolumeCount),
    "MaxGCEPDVolumeCount": _plain(MaxGCEPDVolumeCount),
    "MaxCSIVolumeCountPred": _plain(MaxCSIVolumeCount),
    "MaxAzureDiskVolumeCount": _plain(MaxAzureDiskVolumeCount),
    "MaxCinderVolumeCount": _plain(MaxCinderVolumeCount),
    "CheckVolumeBinding": _plain(CheckVolumeBinding),
    "NoVolumeZoneConflict": _plain(NoVolumeZoneConflict),
    "CheckNodeMemoryPressure": _plain(CheckNodeMemoryPressure),
    "CheckNodePIDPressure": _plain(CheckNodePIDPressure),
    "CheckNodeDiskPressure": _plain(CheckNodeDiskPressure),
    "EvenPodsSpread": _plain(EvenPodsSpread),
    "MatchInterPodAffinity": _plain(MatchInterPodAffinity),
}

# Old names kube-scheduler still accepts.
PREDICATE_ALIASES: Final[Mapping[str, str]] = {"PodFitsPorts": "PodFitsHostPorts"}

# A custom predicate's argument key -> the predicate it configures.
PREDICATE_ARGUMENTS: Final[Mapping[str, str]] = {
    factory.argument_key: name for name, factory in PREDICATES.items() if factory.argument_key
}

# Always configured, whatever the policy says.
MANDATORY_PREDICATES: Final = ("CheckNodeUnschedulable", "PodToleratesNodeTaints")

# predicateOrdering of 1.20: filters run in this order, whatever the order in the policy.
PREDICATE_ORDERING_1_20: Final = (
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
PREDICATE_ORDERING: Final = (
    "CheckNodeCondition",
    *PREDICATE_ORDERING_1_20[:8],
    "PodToleratesNodeNoExecuteTaints",
    *PREDICATE_ORDERING_1_20[8:17],
    "CheckNodeMemoryPressure",
    "CheckNodePIDPressure",
    "CheckNodeDiskPressure",
    *PREDICATE_ORDERING_1_20[17:],
)
PREDICATE_ORDERING_BEFORE_1_20: Final = tuple(
    name for name in PREDICATE_ORDERING if name not in PREDICATE_ORDERING_1_20
)

# LegacyRegistry.DefaultPredicates: used when a policy has no `predicates` field.
DEFAULT_PREDICATES_1_20: Final = frozenset(
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
DEFAULT_PREDICATES: Final = tuple(name for name in PREDICATE_ORDERING if name in DEFAULT_PREDICATES_1_20)

# ----------------------------------------------------------------------------------- priorities

PRIORITIES: Final[Mapping[str, PriorityFactory]] = {
    "LeastRequestedPriority": PriorityFactory(LeastRequestedPriority),
    "MostRequestedPriority": PriorityFactory(MostRequestedPriority),
    "BalancedResourceAllocation": PriorityFactory(BalancedResourceAllocation),
    "SelectorSpreadPriority": PriorityFactory(SelectorSpreadPriority),
    "ServiceAntiAffinity": PriorityFactory(ServiceAntiAffinityPriority, "serviceAntiAffinity"),
    "NodeLabel": PriorityFactory(NodeLabelPriority, "labelPreference"),
    "NodeAffinityPriority": PriorityFactory(NodeAffinityPriority),
    "TaintTolerationPriority": PriorityFactory(TaintTolerationPriority),
    "InterPodAffinityPriority": PriorityFactory(InterPodAffinityPriority),
    "ImageLocalityPriority": PriorityFactory(ImageLocalityPriority),
    "NodePreferAvoidPodsPriority": PriorityFactory(NodePreferAvoidPodsPriority),
    "RequestedToCapacityRatioPriority": PriorityFactory(
        RequestedToCapacityRatioPriority, "requestedToCapacityRatioArguments"
    ),
    "ResourceLimitsPriority": PriorityFactory(ResourceLimitsPriority),
    "EvenPodsSpreadPriority": PriorityFactory(PodTopologySpreadPriority),
}

# Old names, and the 1.20 plugin names it accepts as priority names.
PRIORITY_ALIASES: Final[Mapping[str, str]] = {
    "ServiceSpreadingPriority": "SelectorSpreadPriority",
    "ServiceAffinity": "ServiceAntiAffinity",
    "RequestedToCapacityRatio": "RequestedToCapacityRatioPriority",
}

# A custom priority's argument key -> the priority it configures.
PRIORITY_ARGUMENTS: Final[Mapping[str, str]] = {
    factory.argument_key: name for name, factory in PRIORITIES.items() if factory.argument_key
}

# Accepted and then dropped, as 1.20's factory.go does ("Skip registering priority"): a constant
# score changes no decision.
SKIPPED_PRIORITIES: Final = frozenset({"EqualPriority"})

# LegacyRegistry.DefaultPriorities: used when a policy has no `priorities` field.
DEFAULT_PRIORITIES_1_20: Final[Mapping[str, int]] = {
    "SelectorSpreadPriority": 1,
    "InterPodAffinityPriority": 1,
    "LeastRequestedPriority": 1,
    "BalancedResourceAllocation": 1,
    "NodePreferAvoidPodsPriority": 10000,
    "NodeAffinityPriority": 1,
    "TaintTolerationPriority": 1,
    "ImageLocalityPriority": 1,
    "EvenPodsSpreadPriority": 2,
}
DEFAULT_PRIORITIES: Final[Mapping[str, int]] = dict(sorted(DEFAULT_PRIORITIES_1_20.items()))

# ------------------------------------------------------------------------------ declared traits

# Every filter a policy can configure, and ValidNode, which the algorithm applies to every node first.
PREDICATE_CLASSES: Final[tuple[type[Predicate], ...]] = tuple(
    dict.fromkeys((ValidNode, *(cls for factory in PREDICATES.values() for cls in factory.classes)))
)
# The kinds of cluster object whose add or update moves unschedulable pods back to the active queue
# (1.20's PvAdd, StorageClassAdd, CSINodeAdd...).
REQUEUE_KINDS: Final[frozenset[str]] = frozenset().union(*(cls.requeue_on for cls in PREDICATE_CLASSES))


@functools.lru_cache(maxsize=4096)
def is_unresolvable(reason: str) -> bool:
    """Whether any predicate declares `reason` beyond what an eviction could change: judged on the
    text alone, whatever the policy (the algorithm itself gives ValidNode's reason)."""
    return any(cls.is_unresolvable(reason) for cls in PREDICATE_CLASSES)
