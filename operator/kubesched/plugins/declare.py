"""What a plugin declares about itself, next to its code, and the list the declarations join.

A plugin package's `__init__.py` calls `register(...)` with a `predicate(...)` or `priority(...)`
declaration for each legacy Policy name it answers to: importing the package registers it.
plugins/registry.py imports every package and derives its tables from the list (defaults, order,
aliases, argument keys), and so does policy/kubescheduler_config.py (framework plugin names).
The traits preemption and the queue read (unresolvable reasons, requeue events) stay class
attributes of the predicates themselves (framework.Predicate).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kubesched.plugins.arguments import ArgumentError, in_context
from kubesched.plugins.framework import PluginSettings, Predicate, Priority


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
class PredicateSpec:
    """A legacy predicate name and the filters it enables; called with a policy entry's argument,
    it builds them (`from_settings`, or `from_argument` for one with an `argument_key`)."""

    name: str
    classes: tuple[type[Predicate], ...]
    # Its index in kube-scheduler 1.16's predicatesOrdering (1.20's is the same less the names it
    # refuses): filters run in this order whatever the policy's; None: after those, by name.
    order: int | None
    aliases: tuple[str, ...] = ()
    # The kube-scheduler plugin (KubeSchedulerConfiguration v1beta3 and v1) whose filter this is.
    framework: str = ""
    default: bool = False  # in 1.20's DefaultPredicates (a policy without `predicates`)
    mandatory: bool = False  # added to every policy
    argument_key: str = ""  # set for custom predicates: the key of their `argument`
    refused_by_1_20: bool = False  # a name of older releases, kept with their semantics
    summary: str = ""  # what it checks, in a sentence: the reference page's (docs/reference/plugins.md)

    def __call__(self, argument: Mapping[str, Any] | None, settings: PluginSettings) -> tuple[Predicate, ...]:
        checked = _checked("predicate", self.argument_key, argument)
        if checked is None:
            return tuple(cls.from_settings(settings) for cls in self.classes)
        with _under(self.argument_key):
            return tuple(cls.from_argument(checked) for cls in self.classes)


@dataclass(frozen=True, slots=True)
class PrioritySpec:
    """A legacy priority name and its priority; called with a policy entry's argument, it builds it.
    The weight is the policy's; `default_weight` is its weight in 1.20's DefaultPriorities (0: not
    a default one)."""

    name: str
    cls: type[Priority]
    aliases: tuple[str, ...] = ()
    # The kube-scheduler plugin (KubeSchedulerConfiguration v1beta3 and v1) whose score this is.
    framework: str = ""
    default_weight: int = 0
    argument_key: str = ""  # set for custom priorities: the key of their `argument`
    summary: str = ""  # what it favours, in a sentence: the reference page's (docs/reference/plugins.md)

    def __call__(self, argument: Mapping[str, Any] | None, settings: PluginSettings) -> Priority:
        checked = _checked("priority", self.argument_key, argument)
        if checked is None:
            return self.cls.from_settings(settings)
        with _under(self.argument_key):
            return self.cls.from_argument(checked)


Spec = PredicateSpec | PrioritySpec


def predicate(
    *classes: type[Predicate],
    order: int | None,
    name: str = "",
    aliases: tuple[str, ...] = (),
    framework: str = "",
    default: bool = False,
    mandatory: bool = False,
    argument_key: str = "",
    refused_by_1_20: bool = False,
    summary: str = "",
) -> PredicateSpec:
    """A predicate's declaration; its name is that of its (first) filter unless given."""
    return PredicateSpec(
        name or classes[0].name,
        classes,
        order,
        aliases,
        framework,
        default,
        mandatory,
        argument_key,
        refused_by_1_20,
        summary,
    )


def priority(
    cls: type[Priority],
    *,
    aliases: tuple[str, ...] = (),
    framework: str = "",
    default_weight: int = 0,
    argument_key: str = "",
    summary: str = "",
) -> PrioritySpec:
    """A priority's declaration, under its class's name."""
    return PrioritySpec(cls.name, cls, aliases, framework, default_weight, argument_key, summary)


_registered: list[Spec] = []
_listeners: list[Callable[[], None]] = []


def _clashes(spec: Spec, other: Spec) -> str:
    """What `spec` would declare again that `other` already has (same kind only), or ''."""
    if type(spec) is not type(other):
        return ""
    names = {spec.name, *spec.aliases} & {other.name, *other.aliases}
    if names:
        return f"name {min(names)}"
    if spec.framework and spec.framework == other.framework:
        return f"framework plugin {spec.framework}"
    if spec.argument_key and spec.argument_key == other.argument_key:
        return f"argument key {spec.argument_key}"
    order = spec.order if isinstance(spec, PredicateSpec) else None
    if order is not None and isinstance(other, PredicateSpec) and order == other.order:
        return f"order {order}"
    return ""


def register(*specs: Spec) -> None:
    """Add a plugin's declarations; raises ValueError for one that repeats what another declared."""
    for spec in specs:
        for other in _registered:
            clash = _clashes(spec, other)
            if clash:
                raise ValueError(f"{spec.name} declares the {clash} of {other.name} again")
        _registered.append(spec)
    for listener in _listeners:
        listener()


def registered() -> tuple[Spec, ...]:
    """Every declaration so far, in the order of registration."""
    return tuple(_registered)


def on_register(listener: Callable[[], None]) -> None:
    """Call `listener` after every later registration (plugins/registry.py rebuilds its tables)."""
    _listeners.append(listener)


@contextmanager
def scoped_registrations() -> Iterator[None]:
    """Registrations made inside the block are withdrawn on leaving it (for throw-away plugins)."""
    kept = len(_registered)
    try:
        yield
    finally:
        del _registered[kept:]
        for listener in _listeners:
            listener()
