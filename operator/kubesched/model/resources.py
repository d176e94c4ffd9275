"""Resource amounts as the scheduler counts them: millicores, bytes, pod slots, extended resources."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesched.model.quantity import QuantityError, milli_value, parse_quantity, value

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# Defaults used for scoring only, so zero-request pods do not all pile onto one node.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


def is_scalar_resource_name(name: str) -> bool:
    """Extended, prefixed-native, hugepages- and attachable-volumes- resources (IsScalarResourceName)."""
    if name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    return "/" in name and not name.startswith("requests.")


@dataclass(frozen=True, slots=True)
class Resource:
    """An amount of each resource; immutable so a snapshot can share it safely."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    allowed_pods: int = 0
    scalar: Mapping[str, int] = field(default_factory=dict)

    def __add__(self, other: Resource) -> Resource:
        return Resource(
            self.milli_cpu + other.milli_cpu,
            self.memory + other.memory,
            self.ephemeral_storage + other.ephemeral_storage,
            self.allowed_pods + other.allowed_pods,
            _merge(self.scalar, other.scalar, lambda a, b: a + b),
        )

    def __sub__(self, other: Resource) -> Resource:
        return Resource(
            self.milli_cpu - other.milli_cpu,
            self.memory - other.memory,
            self.ephemeral_storage - other.ephemeral_storage,
            self.allowed_pods - other.allowed_pods,
            _merge(self.scalar, {k: -v for k, v in other.scalar.items()}, lambda a, b: a + b),
        )

    def max(self, other: Resource) -> Resource:
        return Resource(
            max(self.milli_cpu, other.milli_cpu),
            max(self.memory, other.memory),
            max(self.ephemeral_storage, other.ephemeral_storage),
            max(self.allowed_pods, other.allowed_pods),
            _merge(self.scalar, other.scalar, max),
        )


ZERO = Resource()


def _merge(a: Mapping[str, int], b: Mapping[str, int], op: Any) -> Mapping[str, int]:
    if op is max:  # a resource one side does not name counts as 0 there, on either side
        if not a and not b:
            return a
        return {key: max(a.get(key, 0), b.get(key, 0)) for key in a.keys() | b.keys()}
    if not b:
        return a
    if not a:
        return dict(b)
    out = dict(a)
    for key, amount in b.items():
        out[key] = op(out.get(key, 0), amount)
    return out


def resource_from_list(resources: Mapping[str, Any] | None) -> Resource:
    """Convert a ResourceList (`{"cpu": "100m", ...}`); QuantityError on a malformed or negative amount."""
    if not resources:
        return ZERO
    # As the API server writes them, strings: a cluster's nodes come in a few shapes and its pods
    # ask for a few sizes, each converted once. Anything else is converted each time, so that a
    # malformed amount is reported as its own parse reports it (True equals 1 as a key, but is no
    # quantity). A Resource is immutable: one serves every caller.
    if all(type(amount) is str for amount in resources.values()):
        return _resource_of(tuple(resources.items()))
    return _resource(tuple(resources.items()))


@functools.lru_cache(maxsize=4096)
def _resource_of(items: tuple[tuple[str, str], ...]) -> Resource:
    return _resource(items)


def _resource(items: tuple[tuple[str, Any], ...]) -> Resource:
    milli_cpu = memory = storage = pods = 0
    scalar: dict[str, int] = {}
    for name, raw in items:
        quantity = parse_quantity(raw)
        # The API server refuses these; one that slipped by must not free capacity. (A Fraction's sign
        # is its numerator's: comparing it with 0 goes through the numbers ABCs, far slower.)
        if quantity.numerator < 0:
            raise QuantityError(f"{name} must not be negative, got {raw!r}")
        if name == CPU:
            milli_cpu = milli_value(quantity)
        elif name == MEMORY:
            memory = value(quantity)
        elif name == EPHEMERAL_STORAGE:
            storage = value(quantity)
        elif name == PODS:
            pods = value(quantity)
        elif is_scalar_resource_name(name):
            scalar[name] = value(quantity)
    return Resource(milli_cpu, memory, storage, pods, scalar)
