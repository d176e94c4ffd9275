"""Priorities by their legacy Policy name (kube-scheduler 1.20 `legacy_registry.go`).

Adding a priority: its module here and one REGISTRY line. A factory takes the entry's argument
(the object under its ARGUMENTS key, None for priorities that take none) and the policy-wide
PluginSettings, and returns the priority; it raises ArgumentError for an argument it cannot take.
The weight is the policy's business; priorities that share a 1.20 plugin are combined by the
policy compiler (Priority.plugin, merge, weight_rule).

A priority with an `argument` may have any name (a "custom priority" of the legacy Policy): the
argument's key says which priority it configures (ARGUMENTS). ResourceLimitsPriority, which 1.20
no longer knows, keeps the semantics of the release that last had it (resource_limits.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from kubesched.plugins.arguments import ArgumentError
from kubesched.plugins.framework import PluginSettings, Priority
from kubesched.plugins.image_locality.scoring import ImageLocalityPriority
from kubesched.plugins.inter_pod_affinity.scoring import InterPodAffinityPriority
from kubesched.plugins.node_affinity.scoring import NodeAffinityPriority
from kubesched.plugins.node_label.scoring import NodeLabelPriority
from kubesched.plugins.node_prefer_avoid_pods.scoring import NodePreferAvoidPodsPriority
from kubesched.plugins.node_resources.balanced_allocation import BalancedResourceAllocation
from kubesched.plugins.node_resources.least_allocated import LeastRequestedPriority
from kubesched.plugins.node_resources.most_allocated import MostRequestedPriority
from kubesched.plugins.node_resources.requested_to_capacity_ratio import RequestedToCapacityRatioPriority
from kubesched.plugins.node_resources.resource_limits import ResourceLimitsPriority
from kubesched.plugins.pod_topology_spread.scoring import PodTopologySpreadPriority
from kubesched.plugins.selector_spread.scoring import SelectorSpreadPriority
from kubesched.plugins.service_affinity.scoring import ServiceAntiAffinityPriority
from kubesched.plugins.taint_toleration.scoring import TaintTolerationPriority

PriorityFactory = Callable[[Mapping[str, Any] | None, PluginSettings], Priority]


def _plain(cls: type[Priority]) -> PriorityFactory:
    def factory(argument: Mapping[str, Any] | None, settings: PluginSettings) -> Priority:
        if argument is not None:
            raise ArgumentError("", "this priority takes no argument")
        return cls()

    return factory


def _with_argument(build: Callable[[Mapping[str, Any]], Priority], key: str) -> PriorityFactory:
    def factory(argument: Mapping[str, Any] | None, settings: PluginSettings) -> Priority:
        if argument is None:
            raise ArgumentError("", f"this priority needs an argument with {key}")
        if not isinstance(argument, Mapping):
            raise ArgumentError(key, f"must be an object, got {argument!r}")
        try:
            return build(argument)
        except ArgumentError as exc:
            raise ArgumentError(f"{key}.{exc.field}" if exc.field else key, exc.message) from exc

    return factory


def _selector_spread(argument: Mapping[str, Any] | None, settings: PluginSettings) -> Priority:
    if argument is not None:
        raise ArgumentError("", "this priority takes no argument")
    if settings.default_pod_topology_spread:
        return PodTopologySpreadPriority(system_defaults=True)
    return SelectorSpreadPriority()


def _inter_pod_affinity(argument: Mapping[str, Any] | None, settings: PluginSettings) -> Priority:
    if argument is not None:
        raise ArgumentError("", "this priority takes no argument")
    return InterPodAffinityPriority.from_settings(settings)


REGISTRY: Final[Mapping[str, PriorityFactory]] = {
    "LeastRequestedPriority": _plain(LeastRequestedPriority),
    "MostRequestedPriority": _plain(MostRequestedPriority),
    "BalancedResourceAllocation": _plain(BalancedResourceAllocation),
    "SelectorSpreadPriority": _selector_spread,
    "ServiceAntiAffinity": _with_argument(ServiceAntiAffinityPriority.from_argument, "serviceAntiAffinity"),
    "NodeLabel": _with_argument(NodeLabelPriority.from_argument, "labelPreference"),
    "NodeAffinityPriority": _plain(NodeAffinityPriority),
    "TaintTolerationPriority": _plain(TaintTolerationPriority),
    "InterPodAffinityPriority": _inter_pod_affinity,
    "ImageLocalityPriority": _plain(ImageLocalityPriority),
    "NodePreferAvoidPodsPriority": _plain(NodePreferAvoidPodsPriority),
    "RequestedToCapacityRatioPriority": _with_argument(
        RequestedToCapacityRatioPriority.from_argument, "requestedToCapacityRatioArguments"
    ),
    "ResourceLimitsPriority": _plain(ResourceLimitsPriority),
    "EvenPodsSpreadPriority": _plain(PodTopologySpreadPriority),
}

# Old names, and the 1.20 plugin names it accepts as priority names.
ALIASES: Final[Mapping[str, str]] = {
    "ServiceSpreadingPriority": "SelectorSpreadPriority",
    "ServiceAffinity": "ServiceAntiAffinity",
    "RequestedToCapacityRatio": "RequestedToCapacityRatioPriority",
}

# A custom priority's argument key -> the priority it configures.
ARGUMENTS: Final[Mapping[str, str]] = {
    "serviceAntiAffinity": "ServiceAntiAffinity",
    "labelPreference": "NodeLabel",
    "requestedToCapacityRatioArguments": "RequestedToCapacityRatioPriority",
}

# Accepted and then dropped, as 1.20's factory.go does ("Skip registering priority"): a constant
# score changes no decision.
SKIPPED: Final = frozenset({"EqualPriority"})

# LegacyRegistry.DefaultPriorities: used when a policy has no `priorities` field.
DEFAULTS_1_20: Final[Mapping[str, int]] = {
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
DEFAULTS: Final[Mapping[str, int]] = dict(sorted(DEFAULTS_1_20.items()))

__all__ = [
    "ALIASES",
    "ARGUMENTS",
    "DEFAULTS",
    "DEFAULTS_1_20",
    "REGISTRY",
    "SKIPPED",
    "PriorityFactory",
]
