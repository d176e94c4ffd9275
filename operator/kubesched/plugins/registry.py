"""Predicates and priorities by their legacy Policy name (kube-scheduler 1.20 `legacy_registry.go`),
and the traits the predicates declare, gathered for preemption and the scheduling queue.

Every table here is derived from what the plugins declare (declare.py): adding a plugin is its
folder, whose `__init__.py` registers its names, and one line in PLUGINS below. A declaration is
called with a policy entry's argument (the object under its `argument_key`, None for plugins that
take none) and the policy-wide PluginSettings; it builds the plugin with `from_settings` or
`from_argument` and raises ArgumentError for an argument it cannot take. A predicate name may
enable several filters (GeneralPredicates enables four). The weight is the policy's business;
priorities that share a 1.20 plugin are combined by the policy compiler (Priority.plugin, merge,
weight_rule).

An entry with an `argument` may have any name (a "custom predicate" or "custom priority" of the
legacy Policy): the argument's key says what it configures (PREDICATE_ARGUMENTS,
PRIORITY_ARGUMENTS). Names 1.20 no longer knows (PREDICATE_ORDERING_BEFORE_1_20,
ResourceLimitsPriority) keep the semantics of the release that last had them; see their modules.

The tables are refilled in place when a plugin registers after this module is imported, so that
references taken at import time (compile.py's entry lists, the queue's REQUEUE_KINDS) stay current.
Everyone else reads them only.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Final, TypeVar

# The plugin packages, one line each: importing a package registers its names (declare.register).
from kubesched.plugins import (  # noqa: F401
    general_predicates,
    image_locality,
    inter_pod_affinity,
    node_affinity,
    node_conditions,
    node_label,
    node_name,
    node_ports,
    node_prefer_avoid_pods,
    node_resources,
    node_unschedulable,
    node_volume_limits,
    pod_topology_spread,
    selector_spread,
    service_affinity,
    taint_toleration,
    volume_binding,
    volume_restrictions,
    volume_zone,
)
from kubesched.plugins.declare import PredicateSpec, PrioritySpec, on_register, registered
from kubesched.plugins.framework import Predicate
from kubesched.plugins.node_validity import ValidNode

# ----------------------------------------------------------------------------------- predicates

PREDICATES: Final[dict[str, PredicateSpec]] = {}  # ordered names first, in their order
# Old names kube-scheduler still accepts.
PREDICATE_ALIASES: Final[dict[str, str]] = {}
# A custom predicate's argument key -> the predicate it configures.
PREDICATE_ARGUMENTS: Final[dict[str, str]] = {}
# Always configured, whatever the policy says.
MANDATORY_PREDICATES: Final[list[str]] = []
# The 1.16 order with the names 1.20 refuses (PREDICATE_ORDERING_BEFORE_1_20) where 1.16 had them;
# PREDICATE_ORDERING_1_20 is 1.20's predicateOrdering.
PREDICATE_ORDERING: Final[list[str]] = []
PREDICATE_ORDERING_1_20: Final[list[str]] = []
PREDICATE_ORDERING_BEFORE_1_20: Final[list[str]] = []
# LegacyRegistry.DefaultPredicates: used when a policy has no `predicates` field.
DEFAULT_PREDICATES_1_20: Final[set[str]] = set()
DEFAULT_PREDICATES: Final[list[str]] = []  # in their order
# The kube-scheduler plugin whose filter a predicate is -> the predicate (KubeSchedulerConfiguration).
FRAMEWORK_FILTERS: Final[dict[str, str]] = {}
MANDATORY_FRAMEWORK_FILTERS: Final[list[str]] = []

# ----------------------------------------------------------------------------------- priorities

PRIORITIES: Final[dict[str, PrioritySpec]] = {}  # by name
# Old names, and the 1.20 plugin names it accepts as priority names.
PRIORITY_ALIASES: Final[dict[str, str]] = {}
# A custom priority's argument key -> the priority it configures.
PRIORITY_ARGUMENTS: Final[dict[str, str]] = {}
# Accepted and then dropped, as 1.20's factory.go does ("Skip registering priority"): a constant
# score changes no decision.
SKIPPED_PRIORITIES: Final = frozenset({"EqualPriority"})
# LegacyRegistry.DefaultPriorities: used when a policy has no `priorities` field.
DEFAULT_PRIORITIES_1_20: Final[dict[str, int]] = {}
DEFAULT_PRIORITIES: Final = DEFAULT_PRIORITIES_1_20  # by name, as every priority table here
# The kube-scheduler plugin whose score a priority is -> the priority (KubeSchedulerConfiguration).
FRAMEWORK_SCORES: Final[dict[str, str]] = {}

# ------------------------------------------------------------------------------ declared traits

# Every filter a policy can configure, and ValidNode, which the algorithm applies to every node first.
PREDICATE_CLASSES: Final[list[type[Predicate]]] = []
# The kinds of cluster object whose add or update moves unschedulable pods back to the active queue
# (1.20's PvAdd, StorageClassAdd, CSINodeAdd...).
REQUEUE_KINDS: Final[set[str]] = set()


@functools.lru_cache(maxsize=4096)
def is_unresolvable(reason: str) -> bool:
    """Whether any predicate declares `reason` beyond what an eviction could change: judged on the
    text alone, whatever the policy (the algorithm itself gives ValidNode's reason)."""
    return any(cls.is_unresolvable(reason) for cls in PREDICATE_CLASSES)


K = TypeVar("K")
V = TypeVar("V")


def _refill(table: dict[K, V], items: Iterable[tuple[K, V]]) -> None:
    table.clear()
    table.update(items)


def _rebuild() -> None:
    """Derive every table from the declarations registered so far."""
    specs = registered()
    predicates = [s for s in specs if isinstance(s, PredicateSpec)]
    priorities = sorted((s for s in specs if isinstance(s, PrioritySpec)), key=lambda s: s.name)
    ordered = sorted((s for s in predicates if s.order is not None), key=lambda s: s.order or 0)
    unordered = sorted((s for s in predicates if s.order is None), key=lambda s: s.name)
    predicates = [*ordered, *unordered]

    _refill(PREDICATES, ((s.name, s) for s in predicates))
    _refill(PREDICATE_ALIASES, ((alias, s.name) for s in predicates for alias in s.aliases))
    _refill(PREDICATE_ARGUMENTS, sorted((s.argument_key, s.name) for s in predicates if s.argument_key))
    MANDATORY_PREDICATES[:] = [s.name for s in predicates if s.mandatory]
    PREDICATE_ORDERING[:] = [s.name for s in ordered]
    PREDICATE_ORDERING_1_20[:] = [s.name for s in ordered if not s.refused_by_1_20]
    PREDICATE_ORDERING_BEFORE_1_20[:] = [s.name for s in ordered if s.refused_by_1_20]
    DEFAULT_PREDICATES_1_20.clear()
    DEFAULT_PREDICATES_1_20.update(s.name for s in predicates if s.default)
    DEFAULT_PREDICATES[:] = [s.name for s in predicates if s.default]
    _refill(FRAMEWORK_FILTERS, ((s.framework, s.name) for s in predicates if s.framework))
    MANDATORY_FRAMEWORK_FILTERS[:] = [s.framework for s in predicates if s.mandatory and s.framework]

    _refill(PRIORITIES, ((s.name, s) for s in priorities))
    _refill(PRIORITY_ALIASES, ((alias, s.name) for s in priorities for alias in s.aliases))
    _refill(PRIORITY_ARGUMENTS, sorted((s.argument_key, s.name) for s in priorities if s.argument_key))
    _refill(DEFAULT_PRIORITIES_1_20, ((s.name, s.default_weight) for s in priorities if s.default_weight))
    _refill(FRAMEWORK_SCORES, ((s.framework, s.name) for s in priorities if s.framework))

    PREDICATE_CLASSES[:] = dict.fromkeys((ValidNode, *(cls for s in predicates for cls in s.classes)))
    REQUEUE_KINDS.clear()
    REQUEUE_KINDS.update(*(cls.requeue_on for cls in PREDICATE_CLASSES))
    is_unresolvable.cache_clear()


_rebuild()
on_register(_rebuild)
