"""The nodes of a snapshot as NumPy columns, so that filters and scores run over all nodes at once.

`NodeColumns` depends on the Node objects only (allocatable, labels, taints, cordons) and is built
once per set of nodes. `NodeUsage` depends on the pods placed (requests, pod counts, how many
pods of each namespace and label set run on each node, for spreading and inter-pod affinity, and
the placed pods' affinity terms, model/podindex.py); it is copied on write, one pod at a time, as a
batch places pods, and the cache keeps it up to date from one snapshot to the next. The per-node
code stays the reference: every vectorised plugin must decide exactly as its per-node `filter` or
`score` does, which the property tests check. Amounts too large for int64 arithmetic make the
table unavailable (`build` returns None) and the algorithm falls back to the per-node path.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kubesched.model.affinity import PodAffinity, has_pod_affinity, parse_pod_affinity
from kubesched.model.objects import Node, Pod, Taint
from kubesched.model.podindex import Anchors, TermKey, selector_anchors, term_anchors, term_keys
from kubesched.model.selectors import LabelSelector

# Amounts beyond this cannot be compared or multiplied by 100 safely in int64.
LIMIT = 2**55

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
LabelSet = tuple[str, frozenset[tuple[str, str]], bool]  # (namespace, labels, terminating)


def representable(*values: int) -> bool:
    """Whether these amounts can go into the table's int64 arithmetic."""
    return all(-LIMIT < v < LIMIT for v in values)


@dataclass(eq=False)
class NodeColumns:
    """What the nodes themselves say, one entry per node in snapshot order."""

    nodes: tuple[Node, ...]
    index: Mapping[str, int]
    valid: BoolArray  # no parse error
    alloc_cpu: IntArray
    alloc_memory: IntArray
    alloc_ephemeral: IntArray
    alloc_pods: IntArray
    unschedulable: BoolArray
    taint_set: npt.NDArray[np.int32]  # index into `taint_sets`; 0 is "no taints"
    taint_sets: tuple[tuple[Taint, ...], ...]
    _codes: dict[str, tuple[npt.NDArray[np.int32], tuple[str, ...]]] = field(default_factory=dict)
    _value_codes: dict[str, dict[str, int]] = field(default_factory=dict)
    _zones: tuple[npt.NDArray[np.int32], tuple[str, ...]] | None = None
    _unique: dict[str, bool] = field(default_factory=dict)  # label keys with one node per value
    _masks: dict[Hashable, BoolArray] = field(default_factory=dict)
    _images: dict[Hashable, tuple[npt.NDArray[np.float64], BoolArray]] = field(default_factory=dict)

    @classmethod
    def build(cls, nodes: Sequence[Node]) -> NodeColumns | None:
        count = len(nodes)
        allocatable = [n.allocatable for n in nodes]
        cpu = [a.milli_cpu for a in allocatable]
        memory = [a.memory for a in allocatable]
        ephemeral = [a.ephemeral_storage for a in allocatable]
        pods = [a.allowed_pods for a in allocatable]
        if not representable(*cpu, *memory, *ephemeral, *pods):
            return None
        sets: dict[tuple[Taint, ...], int] = {(): 0}
        taint_set = np.fromiter((sets.setdefault(n.taints, len(sets)) for n in nodes), np.int32, count)
        return cls(
            nodes=tuple(nodes),
            index={n.name: i for i, n in enumerate(nodes)},
            valid=np.fromiter((n.parse_error is None for n in nodes), np.bool_, count),
            alloc_cpu=np.array(cpu, dtype=np.int64),
            alloc_memory=np.array(memory, dtype=np.int64),
            alloc_ephemeral=np.array(ephemeral, dtype=np.int64),
            alloc_pods=np.array(pods, dtype=np.int64),
            unschedulable=np.fromiter((n.unschedulable for n in nodes), np.bool_, count),
            taint_set=taint_set,
            taint_sets=tuple(sets),
        )

    @property
    def count(self) -> int:
        return len(self.nodes)

    def label_codes(self, key: str) -> tuple[npt.NDArray[np.int32], tuple[str, ...]]:
        """Each node's value of label `key` as a code into the returned values; -1 where absent."""
        found = self._codes.get(key)
        if found is None:
            values: dict[str, int] = {}
            codes = np.fromiter(
                (
                    -1 if (v := n.labels.get(key)) is None else values.setdefault(v, len(values))
                    for n in self.nodes
                ),
                np.int32,
                len(self.nodes),
            )
            found = self._codes[key] = (codes, tuple(values))
        return found

    def value_codes(self, key: str) -> Mapping[str, int]:
        """The code of each value of label `key` (label_codes' codes)."""
        positions = self._value_codes.get(key)
        if positions is None:
            _, names = self.label_codes(key)
            positions = self._value_codes[key] = {name: code for code, name in enumerate(names)}
        return positions

    def with_label_in(self, key: str, values: Iterable[str]) -> BoolArray:
        """The nodes whose label `key` has one of `values`."""
        codes, names = self.label_codes(key)
        positions = self.value_codes(key)
        # Index -1 (no such label) reads the trailing False.
        lookup = np.zeros(len(names) + 1, dtype=np.bool_)
        lookup[[positions[v] for v in values if v in positions]] = True
        found: BoolArray = lookup[codes]
        return found

    def domain_totals(self, key: str, per_node: IntArray) -> IntArray:
        """Per node, the sum of `per_node` over the nodes sharing its value of label `key` (its
        topology domain); 0 where it has no such label."""
        codes, values = self.label_codes(key)
        present = codes >= 0
        if self._unique_values(key):  # one node per value, as kubelets set the hostname label
            return np.where(present, per_node, 0)
        # float64 sums of small integers are exact.
        sums = np.bincount(codes[present], weights=per_node[present], minlength=len(values))
        # Index -1 (no such label) reads the trailing 0.
        totals: IntArray = np.append(sums.astype(np.int64), 0)[codes]
        return totals

    def _unique_values(self, key: str) -> bool:
        found = self._unique.get(key)
        if found is None:
            codes, values = self.label_codes(key)
            found = self._unique[key] = len(values) == int(np.count_nonzero(codes >= 0))
        return found

    def image_sizes(self, image: str) -> tuple[npt.NDArray[np.float64], BoolArray]:
        """Each node's size of `image` (as float64, as the score uses it) and where it has it."""
        memo = ("image", image)
        found = self._images.get(memo)
        if found is None:
            sizes = [n.images.get(image) for n in self.nodes]
            present = np.array([s is not None for s in sizes], dtype=np.bool_)
            values = np.array([float(s or 0) for s in sizes], dtype=np.float64)
            found = self._images[memo] = (values, present)
        return found

    def annotated(self, key: str) -> BoolArray:
        """The nodes carrying annotation `key`."""
        memo = ("annotation", key)
        found = self._masks.get(memo)
        if found is None:
            found = np.array([bool(n.annotations.get(key)) for n in self.nodes], dtype=np.bool_)
            self._masks[memo] = found
        return found

    def zone_codes(self) -> tuple[npt.NDArray[np.int32], tuple[str, ...]]:
        """Each node's zone key (Node.zone_key) as a code into the returned keys; -1 for none."""
        if self._zones is None:
            keys: dict[str, int] = {}
            codes = np.fromiter(
                (-1 if not (k := n.zone_key) else keys.setdefault(k, len(keys)) for n in self.nodes),
                np.int32,
                len(self.nodes),
            )
            self._zones = (codes, tuple(keys))
        return self._zones

    def has_label(self, key: str) -> BoolArray:
        codes, _ = self.label_codes(key)
        return codes >= 0

    def match_labels(
        self, keys: Sequence[str], matches: Callable[[Mapping[str, str]], bool], memo: Hashable
    ) -> BoolArray:
        """`matches(labels)` for every node, where the answer depends only on the labels `keys`.

        Evaluated once per distinct combination of those labels' values and remembered under `memo`.
        """
        found = self._masks.get(memo)
        if found is not None:
            return found
        columns = [self.label_codes(k) for k in keys]
        combined = np.zeros(self.count, dtype=np.int64)
        for codes, values in columns:
            combined = combined * (len(values) + 1) + (codes.astype(np.int64) + 1)
        distinct, inverse = np.unique(combined, return_inverse=True)
        verdicts = np.empty(len(distinct), dtype=np.bool_)
        for j, code in enumerate(distinct.tolist()):
            labels: dict[str, str] = {}
            for key, (_, values) in zip(reversed(keys), reversed(columns), strict=True):
                code, value = divmod(code, len(values) + 1)
                if value:
                    labels[key] = values[value - 1]
            verdicts[j] = matches(labels)
        found = self._masks[memo] = verdicts[inverse]
        return found


@dataclass(eq=False)
class NodeUsage:
    """What the pods placed on each node add up to; rows change one pod at a time."""

    requested_cpu: IntArray
    requested_memory: IntArray
    requested_ephemeral: IntArray
    pod_count: IntArray
    non_zero_cpu: IntArray
    non_zero_memory: IntArray
    # Pods per node, by namespace, labels and whether they are terminating: what selectors count
    # (spreading leaves terminating pods out, inter-pod affinity does not).
    groups: dict[LabelSet, IntArray]
    # The placed pods' inter-pod (anti-)affinity terms: per term, how many pods carry it on each
    # node row that has any (model/podindex.py).
    terms: dict[TermKey, dict[int, int]] = field(default_factory=dict)
    # The label sets of `groups` under each of their labels; the terms under their selectors' anchors.
    group_anchors: Anchors[LabelSet] = field(default_factory=Anchors)
    term_anchors: Anchors[TermKey] = field(default_factory=Anchors)
    _matches: dict[Hashable, IntArray] = field(default_factory=dict)
    # Copy on write: `_shared` when the six arrays may be held by another instance too; the group
    # arrays and term counts this instance made or copied itself (the others may be shared).
    _shared: bool = False
    _own_groups: set[LabelSet] = field(default_factory=set)
    _own_terms: set[TermKey] = field(default_factory=set)

    @classmethod
    def build(cls, pods_by_node: Sequence[Mapping[str, Pod]]) -> NodeUsage | None:
        count = len(pods_by_node)

        def zeros() -> IntArray:
            return np.zeros(count, dtype=np.int64)

        usage = cls(zeros(), zeros(), zeros(), zeros(), zeros(), zeros(), {})
        # The replicas of one controller carry the same terms: each set parsed once.
        parsed: dict[tuple[str, str, str], PodAffinity] = {}
        for i, pods in enumerate(pods_by_node):
            for pod in pods.values():
                affinity = None
                if has_pod_affinity(pod):
                    # The parse reads the pod's namespace, labels (matchLabelKeys) and affinity,
                    # JSON values whose repr tells them apart.
                    key = (pod.namespace, repr(pod.labels), repr(pod.affinity))
                    affinity = parsed.get(key)
                    if affinity is None:
                        affinity = parsed[key] = parse_pod_affinity(pod)
                if not usage._add(i, pod, 1, affinity):
                    return None
        return usage

    def with_pod(self, i: int, pod: Pod, affinity: PodAffinity | None = None) -> NodeUsage | None:
        """A copy with `pod` added on node `i` (sharing every array it does not change); `affinity`:
        its terms when already parsed."""
        copy = self._view()
        return copy if copy._add(i, pod, 1, affinity) else None

    def share(self) -> NodeUsage:
        """A view for a snapshot: it never changes, as this instance copies what it changes next."""
        self._shared = True
        self._own_groups = set()
        self._own_terms = set()
        return self._view()

    def _view(self) -> NodeUsage:
        return NodeUsage(
            self.requested_cpu,
            self.requested_memory,
            self.requested_ephemeral,
            self.pod_count,
            self.non_zero_cpu,
            self.non_zero_memory,
            dict(self.groups),
            dict(self.terms),
            self.group_anchors.view(),
            self.term_anchors.view(),
            _shared=True,
        )

    def add(self, i: int, pod: Pod) -> bool:
        """Count `pod` on node `i` in place; False when the amounts no longer fit in the table."""
        return self._add(i, pod, 1)

    def remove(self, i: int, pod: Pod) -> bool:
        return self._add(i, pod, -1)

    def _thaw(self, key: LabelSet) -> None:
        if self._shared:
            self.requested_cpu = self.requested_cpu.copy()
            self.requested_memory = self.requested_memory.copy()
            self.requested_ephemeral = self.requested_ephemeral.copy()
            self.pod_count = self.pod_count.copy()
            self.non_zero_cpu = self.non_zero_cpu.copy()
            self.non_zero_memory = self.non_zero_memory.copy()
            self._shared = False
        if key in self.groups and key not in self._own_groups:
            self.groups[key] = self.groups[key].copy()
            self._own_groups.add(key)
        self._matches = {}

    def _add(self, i: int, pod: Pod, sign: int, affinity: PodAffinity | None = None) -> bool:
        key = (pod.namespace, frozenset(pod.labels.items()), pod.deleting)
        self._thaw(key)
        want = pod.requests
        if not representable(
            want.milli_cpu, want.memory, want.ephemeral_storage, pod.non_zero_milli_cpu, pod.non_zero_memory
        ):
            return False
        self.requested_cpu[i] += sign * want.milli_cpu
        self.requested_memory[i] += sign * want.memory
        self.requested_ephemeral[i] += sign * want.ephemeral_storage
        self.pod_count[i] += sign
        self.non_zero_cpu[i] += sign * pod.non_zero_milli_cpu
        self.non_zero_memory[i] += sign * pod.non_zero_memory
        if not representable(
            int(self.requested_cpu[i]), int(self.requested_memory[i]), int(self.requested_ephemeral[i])
        ):
            return False
        counts = self.groups.get(key)
        if counts is None:
            counts = self.groups[key] = np.zeros(len(self.pod_count), dtype=np.int64)
            self._own_groups.add(key)
            self.group_anchors.file(key, key[1])
        counts[i] += sign
        if sign < 0 and not counts.any():
            # Its last pod went: label sets come and go with ReplicaSets and Jobs (a pod-template-hash,
            # a controller-uid), and one kept per set ever seen would grow for as long as the cache lives.
            del self.groups[key]
            self._own_groups.discard(key)
            self.group_anchors.unfile(key, key[1])
        for term in term_keys(pod, affinity):
            self._count_term(term, i, sign)
        return True

    def _count_term(self, key: TermKey, i: int, sign: int) -> None:
        counts = self.terms.get(key)
        if counts is None:
            counts = self.terms[key] = {}
            self._own_terms.add(key)
            self.term_anchors.file(key, term_anchors(key))
        elif key not in self._own_terms:
            counts = self.terms[key] = dict(counts)
            self._own_terms.add(key)
        count = counts.get(i, 0) + sign
        if count:
            counts[i] = count
        else:
            del counts[i]
        if not counts:
            del self.terms[key]
            self._own_terms.discard(key)
            self.term_anchors.unfile(key, term_anchors(key))

    def pods_matching(
        self,
        selector: LabelSelector,
        accepts: Callable[[str, Mapping[str, str]], bool],
        memo: Hashable,
        *,
        terminating: bool = False,
    ) -> IntArray:
        """Per node, the pods whose namespace and labels `accepts` takes (terminating ones only
        with `terminating`), remembered under `memo`. `accepts` must reject every label set
        `selector` does: only those the selector's anchors allow are looked at."""
        found = self._matches.get(memo)
        if found is None:
            found = np.zeros(len(self.pod_count), dtype=np.int64)
            anchors = selector_anchors(selector)
            candidates: Iterable[LabelSet] = (
                self.groups if anchors is None else [k for a in anchors for k in self.group_anchors.get(a)]
            )
            for key in candidates:
                namespace, labels, deleting = key
                if (terminating or not deleting) and accepts(namespace, dict(labels)):
                    found += self.groups[key]
            self._matches[memo] = found
        return found

    def selected(self, namespace: str, selector: LabelSelector) -> IntArray:
        """Per node, the non-terminating pods of `namespace` that `selector` matches
        (countPodsMatchSelector)."""
        return self.pods_matching(
            selector,
            lambda pod_namespace, labels: pod_namespace == namespace and selector.matches(labels),
            ("selected", namespace, selector),
        )

    def placed_terms(self, labels: Mapping[str, str]) -> Iterator[tuple[TermKey, Mapping[int, int]]]:
        """The placed pods' terms whose selector may match a pod labelled `labels`, each with how many
        pods carry it per node row; the caller matches each term itself."""
        anchors, terms = self.term_anchors, self.terms
        for pair in labels.items():
            for key in anchors.get(pair):
                yield key, terms[key]
        for key in anchors.get(None):
            yield key, terms[key]


@dataclass(frozen=True, slots=True)
class NodeTable:
    """The columns and the usage of one snapshot, as the vectorised plugins receive them."""

    columns: NodeColumns
    usage: NodeUsage

    @property
    def count(self) -> int:
        return self.columns.count


__all__ = ["LIMIT", "NodeColumns", "NodeTable", "NodeUsage", "representable"]
