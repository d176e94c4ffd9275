"""Typed, immutable views of pods and nodes parsed from the API server's raw dicts.

Parsing never raises: a malformed field is recorded in `parse_error`, so a bad object is
reported to the user (event, log) instead of crashing a watch handler or the scheduling loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubesched.model.quantity import QuantityError
from kubesched.model.resources import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    MEMORY,
    ZERO,
    Resource,
    resource_from_list,
)
from kubesched.model.unsupported import unsupported_fields

ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str
    protocol: str
    port: int


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str  # "Equal" or "Exists"
    value: str
    effect: str  # "" matches every effect

    def tolerates(self, taint: Taint) -> bool:
        """ToleratesTaint from k8s.io/api/core/v1/toleration.go."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return False


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    uid: str
    controller: bool


@dataclass(frozen=True, slots=True)
class Pod:
    """What the scheduler needs of a pod; `spec` keeps the rest (affinity, volumes) for the plugins."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    scheduler_name: str
    node_name: str
    nominated_node_name: str
    phase: str
    priority: int
    preemption_policy: str
    created: datetime
    deleting: bool
    requests: Resource
    non_zero_milli_cpu: int
    non_zero_memory: int
    host_ports: tuple[HostPort, ...]
    node_selector: Mapping[str, str]
    tolerations: tuple[Toleration, ...]
    owners: tuple[OwnerRef, ...]
    spec: Mapping[str, Any] = field(repr=False)
    parse_error: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict, repr=False)
    # spec.schedulingGates' names: while any is left the pod waits outside the queue (PreEnqueue).
    scheduling_gates: tuple[str, ...] = ()
    # The fields it uses that kubesched refuses (kubesched.model.unsupported): it is never bound.
    unsupported: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def affinity(self) -> Mapping[str, Any]:
        return self.spec.get("affinity") or {}

    @property
    def volumes(self) -> list[Mapping[str, Any]]:
        return self.spec.get("volumes") or []


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    uid: str
    labels: Mapping[str, str]
    allocatable: Resource
    unschedulable: bool
    taints: tuple[Taint, ...]
    raw_status: Mapping[str, Any] = field(repr=False)
    parse_error: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict, repr=False)
    # Every name of every image the node reports, with the image's size (NodeInfo.ImageStates).
    images: Mapping[str, int] = field(default_factory=dict, repr=False)

    @property
    def zone_key(self) -> str:
        """GetZoneKey: region and zone joined, or "" when the node has neither.

        1.20 reads the beta failure-domain labels first and falls back to the topology ones.
        """
        labels = self.labels
        # Plain look-ups: selector spreading asks for every feasible node of every pod.
        zone = labels.get(ZONE_LABELS[1])
        if zone is None:
            zone = labels.get(ZONE_LABELS[0], "")
        region = labels.get(REGION_LABELS[1])
        if region is None:
            region = labels.get(REGION_LABELS[0], "")
        if not region and not zone:
            return ""
        return f"{region}:\x00:{zone}"


def parse_time(raw: str | None) -> datetime:
    if not raw:
        return _EPOCH
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return _EPOCH


def _container_requests(container: Mapping[str, Any]) -> Mapping[str, Any]:
    return (container.get("resources") or {}).get("requests") or {}


def _amounts(requests: Mapping[str, Any]) -> tuple[Resource, int, int]:
    """A container's requests, and its non-zero cpu and memory: what it asks for, or the scoring
    defaults for what it does not name. resource_from_list converts each distinct list of strings
    once, as the pods of one workload ask alike, thousands at once at start-up."""
    amount = resource_from_list(requests)
    cpu = amount.milli_cpu if CPU in requests else DEFAULT_MILLI_CPU_REQUEST
    mem = amount.memory if MEMORY in requests else DEFAULT_MEMORY_REQUEST
    return amount, cpu, mem


def is_restartable_init_container(container: Mapping[str, Any]) -> bool:
    """A sidecar (1.29+): an init container with `restartPolicy: Always` runs beside the containers."""
    return container.get("restartPolicy") == "Always"


def pod_requests(spec: Mapping[str, Any]) -> tuple[Resource, int, int]:
    """resource.PodRequests (1.32): containers summed, init containers as a maximum, overhead added.

    A restartable init container (sidecar) adds to the containers' sum, and to every init container
    that starts after it: init container i needs its own requests plus the sidecars declared before
    it. Without sidecars this is 1.20's calculateResource. Returns the requests and the non-zero cpu
    and memory used for scoring (NonMissingContainerRequests: the defaults per container).
    """
    total = ZERO
    nz_cpu = nz_mem = 0
    for container in spec.get("containers") or []:
        amount, cpu, mem = _amounts(_container_requests(container))
        total = total + amount
        nz_cpu += cpu
        nz_mem += mem
    # The sidecars declared so far, which run while the next init container does.
    sidecars: Resource | None = None
    sidecar_cpu = sidecar_mem = 0
    init_total = ZERO
    init_cpu = init_mem = 0
    for container in spec.get("initContainers") or []:
        amount, cpu, mem = _amounts(_container_requests(container))
        if is_restartable_init_container(container):
            total = total + amount
            nz_cpu += cpu
            nz_mem += mem
            sidecars = amount if sidecars is None else sidecars + amount
            sidecar_cpu += cpu
            sidecar_mem += mem
            amount, cpu, mem = sidecars, sidecar_cpu, sidecar_mem
        elif sidecars is not None:
            amount = amount + sidecars
            cpu += sidecar_cpu
            mem += sidecar_mem
        init_total = init_total.max(amount)
        init_cpu = max(init_cpu, cpu)
        init_mem = max(init_mem, mem)
    total = total.max(init_total)
    nz_cpu = max(nz_cpu, init_cpu)
    nz_mem = max(nz_mem, init_mem)
    overhead = spec.get("overhead") or {}
    if overhead:
        extra = resource_from_list(overhead)
        total = total + extra
        if CPU in overhead:
            nz_cpu += extra.milli_cpu
        if MEMORY in overhead:
            nz_mem += extra.memory
    return total, nz_cpu, nz_mem


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """GetHostPorts (1.32): the containers' host ports, and those of the sidecars, which run as long."""
    ports = []
    sidecars = [c for c in spec.get("initContainers") or [] if is_restartable_init_container(c)]
    for container in [*sidecars, *(spec.get("containers") or [])]:
        for port in container.get("ports") or []:
            host_port = int(port.get("hostPort") or 0)
            if host_port > 0:
                ports.append(
                    HostPort(port.get("hostIP") or "0.0.0.0", port.get("protocol") or "TCP", host_port)
                )
    return tuple(ports)


def _tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(
            t.get("key") or "", t.get("operator") or "Equal", str(t.get("value") or ""), t.get("effect") or ""
        )
        for t in spec.get("tolerations") or []
    )


def _owners(meta: Mapping[str, Any]) -> tuple[OwnerRef, ...]:
    return tuple(
        OwnerRef(o.get("kind", ""), o.get("name", ""), o.get("uid", ""), bool(o.get("controller")))
        for o in meta.get("ownerReferences") or []
    )


def pod_from_dict(obj: Mapping[str, Any]) -> Pod:
    """Build a Pod view; malformed requests leave the pod with `parse_error` set and zero requests."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    error: str | None = None
    try:
        requests, nz_cpu, nz_mem = pod_requests(spec)
    except (QuantityError, TypeError, AttributeError) as exc:
        requests, nz_cpu, nz_mem = ZERO, 0, 0
        error = f"invalid resource requests: {exc}"
    try:
        host_ports = _host_ports(spec)
        tolerations = _tolerations(spec)
    except (TypeError, ValueError, AttributeError) as exc:
        host_ports, tolerations = (), ()
        error = error or f"invalid pod spec: {exc}"
    try:
        priority = int(spec.get("priority") or 0)
    except (TypeError, ValueError):
        priority = 0
    node_selector = spec.get("nodeSelector") or {}
    if not isinstance(node_selector, Mapping):
        node_selector = {}
        error = error or "invalid pod spec: nodeSelector must be a map"
    if not isinstance(spec.get("affinity") or {}, Mapping):
        error = error or "invalid pod spec: affinity must be an object"
    try:
        gates = tuple(str(gate.get("name") or "") for gate in spec.get("schedulingGates") or ())
        unsupported = unsupported_fields(spec)
    except (TypeError, AttributeError) as exc:
        gates, unsupported = (), ()
        error = error or f"invalid pod spec: {exc}"
    return Pod(
        namespace=meta.get("namespace") or "default",
        name=meta.get("name") or "",
        uid=meta.get("uid") or "",
        resource_version=meta.get("resourceVersion") or "",
        labels=meta.get("labels") or {},
        scheduler_name=spec.get("schedulerName") or "default-scheduler",
        node_name=spec.get("nodeName") or "",
        nominated_node_name=status.get("nominatedNodeName") or "",
        phase=status.get("phase") or "",
        priority=priority,
        preemption_policy=spec.get("preemptionPolicy") or "PreemptLowerPriority",
        created=parse_time(meta.get("creationTimestamp")),
        deleting=bool(meta.get("deletionTimestamp")),
        requests=requests,
        non_zero_milli_cpu=nz_cpu,
        non_zero_memory=nz_mem,
        host_ports=host_ports,
        node_selector=node_selector,
        tolerations=tolerations,
        owners=_owners(meta),
        spec=spec,
        parse_error=error,
        annotations=meta.get("annotations") or {},
        scheduling_gates=gates,
        unsupported=unsupported,
    )


def _node_images(status: Mapping[str, Any]) -> dict[str, int]:
    images: dict[str, int] = {}
    for image in status.get("images") or ():
        if not isinstance(image, Mapping):
            continue
        try:
            size = int(image.get("sizeBytes") or 0)
        except (TypeError, ValueError):
            size = 0
        for name in image.get("names") or ():
            images[str(name)] = size
    return images


def node_from_dict(obj: Mapping[str, Any]) -> Node:
    """Build a Node view; a node with malformed allocatable gets `parse_error` and is never chosen."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    error: str | None = None
    if not isinstance(status, Mapping) or not isinstance(spec, Mapping):
        error = "node spec and status must be objects"
        spec = spec if isinstance(spec, Mapping) else {}
        status = status if isinstance(status, Mapping) else {}
    try:
        allocatable = resource_from_list(status.get("allocatable") or status.get("capacity"))
    except (QuantityError, TypeError, AttributeError) as exc:
        allocatable = ZERO
        error = f"invalid allocatable: {exc}"
    if error is None and not (status.get("allocatable") or status.get("capacity")):
        error = "node has no allocatable resources in its status"
    try:
        taints = tuple(
            Taint(t.get("key") or "", str(t.get("value") or ""), t.get("effect") or "")
            for t in spec.get("taints") or []
        )
    except AttributeError as exc:
        taints = ()
        error = error or f"invalid taints: {exc}"
    return Node(
        name=meta.get("name") or "",
        uid=meta.get("uid") or "",
        labels=meta.get("labels") or {},
        allocatable=allocatable,
        unschedulable=bool(spec.get("unschedulable")),
        taints=taints,
        raw_status=status,
        parse_error=error,
        annotations=meta.get("annotations") or {},
        images=_node_images(status),
    )
