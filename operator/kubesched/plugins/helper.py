"""What several plugins share (kube-scheduler's plugins/helper): the Services and controllers that
select a pod, and the selector spreading derives from them; score normalisation; the storage class
of a claim or volume."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from kubesched.model.nodeinfo import ClusterObjects, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.selectors import EVERYTHING, LabelSelector, Requirement, SelectorError
from kubesched.model.table import IntArray

BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"


def storage_class_name(obj: Mapping[str, Any]) -> str:
    """GetPersistentVolumeClaimClass / GetPersistentVolumeClass: a PVC's or PV's class, the beta
    annotation first, then spec.storageClassName; "" for none."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if BETA_STORAGE_CLASS_ANNOTATION in annotations:
        return str(annotations[BETA_STORAGE_CLASS_ANNOTATION] or "")
    return str((obj.get("spec") or {}).get("storageClassName") or "")


def in_namespace(objects: Mapping[str, Mapping[str, Any]], namespace: str) -> Iterator[Mapping[str, Any]]:
    """The objects of one namespace (what a namespaced lister's List returns)."""
    for key, obj in objects.items():
        meta = obj.get("metadata") or {}
        if (meta.get("namespace") or key.partition("/")[0]) == namespace:
            yield obj


def map_selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def pod_services(pod: Pod, objects: ClusterObjects) -> list[Mapping[str, Any]]:
    """GetPodServices: the Services of the pod's namespace whose selector matches its labels."""
    found = []
    for service in in_namespace(objects.services, pod.namespace):
        selector = (service.get("spec") or {}).get("selector")
        # A Service without a selector selects nothing, not everything.
        if selector is not None and map_selects(selector, pod.labels):
            found.append(service)
    return found


def _controller_requirements(objects: Mapping[str, Mapping[str, Any]], pod: Pod) -> list[Requirement] | None:
    """GetPodReplicaSets / GetPodStatefulSets: requirements of every matching selector.

    None when the listing fails as a whole in 1.20: the pod has no labels, nothing matches, or
    any selector in the namespace does not parse.
    """
    if not pod.labels:
        return None
    found: list[Requirement] = []
    matched = False
    for obj in in_namespace(objects, pod.namespace):
        try:
            selector = LabelSelector.parse((obj.get("spec") or {}).get("selector"))
        except SelectorError:
            return None
        if selector.empty or not selector.matches(pod.labels):
            continue
        matched = True
        found.extend(selector.requirements)
    return found if matched else None


def default_selector(pod: Pod, objects: ClusterObjects) -> LabelSelector:
    """helper.DefaultSelector: the selectors of everything that selects the pod, ANDed."""
    label_set: dict[str, str] = {}
    for service in pod_services(pod, objects):
        label_set.update((service.get("spec") or {}).get("selector") or {})
    if pod.labels:
        for rc in in_namespace(objects.replication_controllers, pod.namespace):
            selector = (rc.get("spec") or {}).get("selector") or {}
            if selector and map_selects(selector, pod.labels):
                label_set.update(selector)
    result = LabelSelector.from_map(label_set) if label_set else EVERYTHING
    for controllers in (objects.replica_sets, objects.stateful_sets):
        requirements = _controller_requirements(controllers, pod)
        if requirements:
            result = result.add(requirements)
    return result


def snapshot_default_selector(pod: Pod, snapshot: Snapshot) -> LabelSelector:
    """default_selector, made once for the batch per namespace and label set (the replicas of one
    controller share it), and again whenever the objects that select pods differ."""
    objects = snapshot.objects
    sources = (objects.services, objects.replication_controllers, objects.replica_sets, objects.stateful_sets)
    key = ("default selector", pod.namespace, frozenset(pod.labels.items()))
    found = snapshot.node_memo.get(key)
    if found is None or any(a is not b for a, b in zip(found[0], sources, strict=True)):
        found = snapshot.node_memo[key] = (sources, default_selector(pod, objects))
    selector: LabelSelector = found[1]
    return selector


def default_normalize(scores: list[int], max_priority: int, reverse: bool) -> None:
    """helper.DefaultNormalizeScore: scale to 0..max_priority by the highest score, in place;
    `reverse` turns it upside down (and gives every node max_priority when all scores are 0)."""
    max_count = max(scores, default=0)
    if max_count <= 0:
        if reverse:
            scores[:] = [max_priority] * len(scores)
        return
    for i, score in enumerate(scores):
        scaled = max_priority * score // max_count
        scores[i] = max_priority - scaled if reverse else scaled


def go_div(a: int, b: int) -> int:
    """Go's integer division, which truncates toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def default_normalize_array(scores: IntArray, max_priority: int, reverse: bool) -> IntArray:
    """`default_normalize` over an array."""
    max_count = int(scores.max()) if len(scores) else 0
    if max_count <= 0:
        return np.full(len(scores), max_priority, dtype=np.int64) if reverse else scores
    scaled: IntArray = max_priority * scores // max_count
    return max_priority - scaled if reverse else scaled
