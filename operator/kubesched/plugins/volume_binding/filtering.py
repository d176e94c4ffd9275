"""CheckVolumeBinding (plugin VolumeBinding, PreFilter and Filter; the volume binder's FindPodVolumes).

A bound claim's PV must accept the node (its nodeAffinity). An unbound claim of a
WaitForFirstConsumer StorageClass needs, on that node, an available PV it can bind to (class,
size, access modes, volume mode, selector, node affinity; the smallest fitting one is taken,
each PV for one claim only) or a StorageClass able to provision there (a provisioner, and
allowedTopologies matching the node) and, as in kube-scheduler 1.32, with room for it there: when
the class's provisioner is a CSIDriver with `storageCapacity: true`, some CSIStorageCapacity of
the class must reach the node and offer at least the claim's size (hasEnoughCapacity in 1.32's
volumebinding/binder.go; no such driver, or a claim without a storage request, is not checked,
which is 1.20's behaviour with its alpha gate off). An unbound claim of an Immediate class (or
pre-bound to a PV but not bound yet) makes the pod unschedulable everywhere: the PV controller
binds those.

Scope: the decision. `choose_volumes` is the choice itself, shared with
kubesched.algorithm.volume_reserve, which assumes the chosen PVs for the rest of the batch
(Reserve); kubesched.kube.volume_writer writes the bindings before the pod is bound (PreBind).
Generic ephemeral volumes are refused (model/unsupported.py); 1.32's capacity scoring (alpha) is
not modelled.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kubesched.model.nodeinfo import ClusterObjects, NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.quantity import QuantityError, parse_quantity, value
from kubesched.model.selectors import LabelSelector, NodeSelector, Requirement, SelectorError
from kubesched.model.storage_capacity import StorageCapacity, capacity_from_dict, tracks_capacity
from kubesched.plugins.framework import FITS, SKIP, Predicate, Reject
from kubesched.plugins.helper import storage_class_name

ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "pvc(s) bound to non-existent pv(s)"
ERR_REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
FILESYSTEM = "Filesystem"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _storage(amounts: Any) -> Fraction:
    raw = amounts.get("storage") if isinstance(amounts, Mapping) else None
    if raw is None:
        return Fraction(0)
    try:
        return parse_quantity(raw)
    except QuantityError:
        return Fraction(0)


def claim_request(pvc: Mapping[str, Any]) -> Fraction:
    return _storage((_spec(pvc).get("resources") or {}).get("requests"))


def pv_node_affinity(pv: Mapping[str, Any]) -> NodeSelector | None:
    """The PV's required node affinity; None accepts every node. A malformed one accepts none."""
    required = (_spec(pv).get("nodeAffinity") or {}).get("required")
    if required is None:
        return None
    try:
        return NodeSelector.parse(required)
    except SelectorError:
        return NodeSelector(())


def pv_accepts(pv: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """volumeutil.CheckNodeAffinity: against the node's labels only (matchFields are ignored)."""
    selector = pv_node_affinity(pv)
    return selector is None or selector.matches(labels, "")


def is_bound_to_claim(pv: Mapping[str, Any], pvc: Mapping[str, Any]) -> bool:
    """IsVolumeBoundToClaim: claimRef names the claim (and its uid, when the ref has one)."""
    ref = _spec(pv).get("claimRef")
    if not isinstance(ref, Mapping):
        return False
    meta = _meta(pvc)
    if ref.get("name") != meta.get("name") or ref.get("namespace") != meta.get("namespace"):
        return False
    return not ref.get("uid") or ref.get("uid") == meta.get("uid")


def match_topology(allowed: Any, labels: Mapping[str, str]) -> bool:
    """MatchTopologySelectorTerms: no terms match everything; terms are ORed, expressions ANDed (In)."""
    if not allowed:
        return True
    for term in allowed:
        expressions = (term or {}).get("matchLabelExpressions") if isinstance(term, Mapping) else None
        if not expressions:
            continue
        try:
            selector = LabelSelector(
                tuple(Requirement.build(e.get("key"), "In", e.get("values")) for e in expressions)
            )
        except (SelectorError, AttributeError):
            continue
        if selector.matches(labels):
            return True
    return False


@dataclass(frozen=True, slots=True)
class Candidate:
    """A PV that could bind a claim on some node; `prebound` when its claimRef names the claim."""

    name: str
    size: Fraction
    prebound: bool
    node_affinity: NodeSelector | None


@dataclass(frozen=True, slots=True)
class CapacityNeed:
    """hasEnoughCapacity's node-independent half: the CSIStorageCapacities of the claim's class
    that offer its size; a node needs one that reaches it."""

    size: int  # bytes
    offers: tuple[StorageCapacity, ...]

    def met_on(self, labels: Mapping[str, str]) -> bool:
        return any(offer.reaches(labels) for offer in self.offers)


@dataclass(frozen=True, slots=True)
class ClaimToBind:
    pvc: Mapping[str, Any]
    selected_node: str | None
    candidates: tuple[Candidate, ...]
    provisioner: str | None  # None: no class (an error if provisioning is needed)
    class_error: str | None
    allowed_topologies: Any
    capacity: CapacityNeed | None = None  # None: provisioning it checks no capacity


@dataclass(frozen=True, slots=True)
class VolumeBindingState:
    bound: tuple[Mapping[str, Any], ...]  # the PVs of the bound claims; {} for a missing PV
    to_bind: tuple[ClaimToBind, ...]


def _candidates(pvc: Mapping[str, Any], objects: ClusterObjects) -> tuple[Candidate, ...]:
    """FindMatchingVolume's node-independent checks, in PV order."""
    wanted_class = storage_class_name(pvc)
    requested = claim_request(pvc)
    spec = _spec(pvc)
    wanted_mode = spec.get("volumeMode") or FILESYSTEM
    selector: LabelSelector | None = None
    if spec.get("selector") is not None:
        try:
            selector = LabelSelector.parse(spec.get("selector"))
        except SelectorError:
            selector = LabelSelector(nothing=True)
    modes = set(spec.get("accessModes") or ())
    found = []
    for name, pv in objects.persistent_volumes.items():
        if storage_class_name(pv) != wanted_class:
            continue  # pvCache.ListPVs(storageClassName)
        pv_spec = _spec(pv)
        prebound = is_bound_to_claim(pv, pvc)
        if pv_spec.get("claimRef") is not None and not prebound:
            continue
        size = _storage(pv_spec.get("capacity"))
        if size < requested or (pv_spec.get("volumeMode") or FILESYSTEM) != wanted_mode:
            continue
        if _meta(pv).get("deletionTimestamp"):
            continue
        if not prebound:
            if (pv.get("status") or {}).get("phase") != "Available":
                continue
            if selector is not None and not selector.matches(_meta(pv).get("labels") or {}):
                continue
            if not modes <= set(pv_spec.get("accessModes") or ()):
                continue
        found.append(Candidate(str(name), size, prebound, pv_node_affinity(pv)))
    return tuple(found)


def _capacity_need(
    pvc: Mapping[str, Any], class_name: str, provisioner: str, objects: ClusterObjects
) -> CapacityNeed | None:
    """What provisioning `pvc` needs of storage capacity; None when nothing is checked: no storage
    request, or a provisioner that is no CSIDriver opting in."""
    raw = ((_spec(pvc).get("resources") or {}).get("requests") or {}).get("storage")
    if raw is None or not tracks_capacity(objects.csi_drivers.get(provisioner)):
        return None
    try:
        size = value(parse_quantity(raw))
    except QuantityError:
        return None  # the API server refuses such a claim; taken as no request, as claim_request does
    offers = []
    for raw_capacity in objects.csi_storage_capacities.values():
        if raw_capacity.get("storageClassName") != class_name:
            continue  # before parsing: a driver publishes one per class and topology segment
        offer = capacity_from_dict(raw_capacity)
        if offer.offers(size):
            offers.append(offer)
    return CapacityNeed(size, tuple(offers))


def _claim_to_bind(pvc: Mapping[str, Any], objects: ClusterObjects) -> ClaimToBind:
    class_name = storage_class_name(pvc)
    storage_class = objects.storage_classes.get(class_name) if class_name else None
    error = None
    if not class_name:
        error = f'no class for claim "{_meta(pvc).get("namespace")}/{_meta(pvc).get("name")}"'
    elif storage_class is None:
        error = f'failed to find storage class "{class_name}"'
    annotations = _meta(pvc).get("annotations") or {}
    selected = annotations.get(ANN_SELECTED_NODE)
    provisioner = None if storage_class is None else str(storage_class.get("provisioner") or "")
    return ClaimToBind(
        pvc,
        None if selected is None else str(selected),
        () if selected is not None else _candidates(pvc, objects),
        provisioner,
        error,
        None if storage_class is None else storage_class.get("allowedTopologies"),
        _capacity_need(pvc, class_name, provisioner, objects) if provisioner else None,
    )


def pod_volume_state(pod: Pod, objects: ClusterObjects) -> VolumeBindingState | Reject | None:
    """PreFilter: the pod's claims split into bound ones and ones to bind on the chosen node."""
    bound = []
    to_bind = []
    for volume in pod.volumes:
        source = volume.get("persistentVolumeClaim") if isinstance(volume, Mapping) else None
        if not isinstance(source, Mapping):
            continue
        claim_name = str(source.get("claimName") or "")
        pvc = objects.persistent_volume_claims.get(f"{pod.namespace}/{claim_name}")
        if pvc is None:
            return Reject((f'persistentvolumeclaim "{claim_name}" not found',))
        if _meta(pvc).get("deletionTimestamp"):
            return Reject((f'persistentvolumeclaim "{claim_name}" is being deleted',))
        pv_name = _spec(pvc).get("volumeName") or ""
        if pv_name and ANN_BIND_COMPLETED in (_meta(pvc).get("annotations") or {}):
            bound.append(objects.persistent_volumes.get(pv_name) or {})
            continue
        class_name = storage_class_name(pvc)
        storage_class = objects.storage_classes.get(class_name) if class_name else None
        if storage_class is not None and not storage_class.get("volumeBindingMode"):
            return Reject((f'VolumeBindingMode not set for StorageClass "{class_name}"',))
        delayed = (
            storage_class is not None and storage_class.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER
        )
        if not delayed or pv_name:
            return Reject((ERR_REASON_UNBOUND_IMMEDIATE,))
        to_bind.append(_claim_to_bind(pvc, objects))
    if not bound and not to_bind:
        return None
    # findMatchingVolumes sorts the claims by requested size, smallest first.
    to_bind.sort(key=lambda c: claim_request(c.pvc))
    return VolumeBindingState(tuple(bound), tuple(to_bind))


def _provisionable(claims: Sequence[ClaimToBind], labels: Mapping[str, str]) -> tuple[bool, bool, str | None]:
    """checkVolumeProvisions: (satisfied, enough storage, error), stopping at the first claim that fails."""
    for claim in claims:
        if claim.class_error is not None:
            return False, False, claim.class_error
        if not claim.provisioner or claim.provisioner == NOT_SUPPORTED_PROVISIONER:
            return False, True, None
        if not match_topology(claim.allowed_topologies, labels):
            return False, True, None
        if claim.capacity is not None and not claim.capacity.met_on(labels):
            return True, False, None
    return True, True, None


class CheckVolumeBinding(Predicate):
    name = "CheckVolumeBinding"
    unresolvable_reasons = frozenset(
        {
            ERR_REASON_BIND_CONFLICT,
            ERR_REASON_NODE_CONFLICT,
            ERR_REASON_NOT_ENOUGH_SPACE,
            ERR_REASON_PV_NOT_EXIST,
            ERR_REASON_UNBOUND_IMMEDIATE,
        }
    )
    # 1.32 also requeues on CSIDriver updates and CSIStorageCapacity adds and updates.
    requeue_on = frozenset(
        {
            "PersistentVolume",
            "PersistentVolumeClaim",
            "StorageClass",
            "CSINode",
            "CSIDriver",
            "CSIStorageCapacity",
        }
    )

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        if not pod.volumes:
            return SKIP
        return pod_volume_state(pod, snapshot.objects) or SKIP

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        labels = node.node.labels
        # FindPodVolumes: every check runs; the reasons come out in 1.20's order.
        bound_satisfied = pvs_found = True
        for pv in state.bound:
            if not pv:
                pvs_found = False
                break
            if not pv_accepts(pv, labels):
                bound_satisfied = False
                break
        choice = self._unbound_choice(state.to_bind, node)
        if choice.error is not None:
            return (choice.error,)
        reasons = []
        if not bound_satisfied:
            reasons.append(ERR_REASON_NODE_CONFLICT)
        if not choice.satisfied:
            reasons.append(ERR_REASON_BIND_CONFLICT)
        if not choice.enough_storage:
            reasons.append(ERR_REASON_NOT_ENOUGH_SPACE)
        if not pvs_found:
            reasons.append(ERR_REASON_PV_NOT_EXIST)
        return reasons or FITS

    @staticmethod
    def _unbound_choice(claims: Sequence[ClaimToBind], node: NodeInfo) -> VolumeChoice:
        if not claims:
            return VolumeChoice(True)
        return choose_volumes(claims, node.name, node.node.labels)


@dataclass(frozen=True, slots=True)
class VolumeChoice:
    """What binding a pod's unbound claims on one node takes: PVs to bind, claims to provision."""

    satisfied: bool
    error: str | None = None
    static: tuple[tuple[ClaimToBind, str], ...] = ()  # (claim, name of the PV it binds to)
    provision: tuple[ClaimToBind, ...] = ()
    enough_storage: bool = True  # False: a claim to provision has no capacity on the node

    @property
    def fits(self) -> bool:
        return self.satisfied and self.enough_storage and self.error is None


def choose_volumes(claims: Sequence[ClaimToBind], node_name: str, labels: Mapping[str, str]) -> VolumeChoice:
    """findMatchingVolumes then checkVolumeProvisions: the smallest fitting PV for each claim,
    smallest claim first, each PV for one claim; the rest must be provisionable on the node, with
    the storage capacity they need."""
    to_provision = []
    to_match = []
    for claim in claims:
        if claim.selected_node is None:
            to_match.append(claim)
        elif claim.selected_node != node_name:
            return VolumeChoice(False)
        else:
            to_provision.append(claim)
    chosen: dict[str, ClaimToBind] = {}
    satisfied = True
    for claim in to_match:
        match = _smallest_match(claim.candidates, labels, chosen.keys())
        if match is None:
            to_provision.append(claim)
            satisfied = False
        else:
            chosen[match] = claim
    if to_provision:
        satisfied, enough_storage, error = _provisionable(to_provision, labels)
        if not (satisfied and enough_storage) or error is not None:
            return VolumeChoice(satisfied, error, enough_storage=enough_storage)
    return VolumeChoice(
        satisfied, None, tuple((claim, pv) for pv, claim in chosen.items()), tuple(to_provision)
    )


def _smallest_match(
    candidates: Sequence[Candidate], labels: Mapping[str, str], chosen: Collection[str]
) -> str | None:
    """The rest of FindMatchingVolume: a PV pre-bound to the claim wins (or loses) outright."""
    best: Candidate | None = None
    for pv in candidates:
        if pv.name in chosen:
            continue
        fits = pv.node_affinity is None or pv.node_affinity.matches(labels, "")
        if pv.prebound:
            return pv.name if fits else None
        if fits and (best is None or pv.size < best.size):
            best = pv
    return None if best is None else best.name
