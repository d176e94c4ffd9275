"""Priorities by their legacy Policy name (kube-scheduler 1.20 `legacy_registry.go`).

Adding a priority: its module here and one REGISTRY line. A factory takes the policy entry's
`argument` (None when absent) and returns the priority; it raises ValueError for an argument
it cannot take. The weight is the policy's business.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from kubesched.algorithm.framework import Priority
from kubesched.algorithm.priorities.balanced_allocation import BalancedResourceAllocation
from kubesched.algorithm.priorities.least_requested import LeastRequestedPriority
from kubesched.algorithm.priorities.selector_spread import SelectorSpreadPriority

PriorityFactory = Callable[[Mapping[str, Any] | None], Priority]


def _no_argument(cls: type[Priority]) -> PriorityFactory:
    def factory(argument: Mapping[str, Any] | None) -> Priority:
        if argument is not None:
            raise ValueError("this priority takes no argument")
        return cls()

    return factory


REGISTRY: Final[Mapping[str, PriorityFactory]] = {
    "LeastRequestedPriority": _no_argument(LeastRequestedPriority),
    "BalancedResourceAllocation": _no_argument(BalancedResourceAllocation),
    "SelectorSpreadPriority": _no_argument(SelectorSpreadPriority),
}

ALIASES: Final[Mapping[str, str]] = {"ServiceSpreadingPriority": "SelectorSpreadPriority"}

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
DEFAULTS: Final[Mapping[str, int]] = {n: w for n, w in sorted(DEFAULTS_1_20.items()) if n in REGISTRY}

# Names kube-scheduler 1.20 registers that have no implementation here yet (the last three are
# the plugin names it also accepts for custom priorities).
NOT_SUPPORTED_YET: Final = frozenset(
    {
        "MostRequestedPriority",
        "RequestedToCapacityRatioPriority",
        "InterPodAffinityPriority",
        "NodePreferAvoidPodsPriority",
        "NodeAffinityPriority",
        "TaintTolerationPriority",
        "ImageLocalityPriority",
        "EvenPodsSpreadPriority",
        "RequestedToCapacityRatio",
        "NodeLabel",
        "ServiceAffinity",
    }
)

__all__ = [
    "ALIASES",
    "DEFAULTS",
    "DEFAULTS_1_20",
    "NOT_SUPPORTED_YET",
    "REGISTRY",
    "SKIPPED",
    "PriorityFactory",
]
