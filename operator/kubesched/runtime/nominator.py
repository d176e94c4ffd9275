"""Pods nominated to a node by preemption, holding their room there while their victims terminate.

kube-scheduler 1.20 keeps them in the scheduling queue's PodNominator
(internal/queue/scheduling_queue.go, nominatedPodMap) and adds the nominated pods of equal or
higher priority to a node before running the filters on it (RunFilterPluginsWithNominatedPods,
framework/runtime/framework.go). Here the scheduler places them in the snapshot it hands the
algorithm instead: the algorithm stays unaware of nominations.

1.20 also runs the filters a second time without the nominated pods (so that a pod with
affinity to a nominated pod does not count on it); that second pass is not done here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from kubesched.model.nodeinfo import Snapshot
from kubesched.model.objects import Pod


class Nominator:
    """uid -> (pod, nominated node). Lives on the event loop."""

    def __init__(self) -> None:
        self._pods: dict[str, tuple[Pod, str]] = {}

    def add(self, pod: Pod, node_name: str) -> None:
        self._pods[pod.uid] = (pod, node_name)

    def update(self, pod: Pod) -> None:
        """A newer version of a pod: keep the nomination, which its watch event may not carry yet."""
        entry = self._pods.get(pod.uid)
        if entry is not None:
            self._pods[pod.uid] = (pod, pod.nominated_node_name or entry[1])
        elif pod.nominated_node_name:
            self._pods[pod.uid] = (pod, pod.nominated_node_name)

    def remove(self, uid: str) -> str | None:
        """Forget a nomination; returns the node it was for."""
        entry = self._pods.pop(uid, None)
        return None if entry is None else entry[1]

    def node_of(self, uid: str) -> str:
        entry = self._pods.get(uid)
        return "" if entry is None else entry[1]

    def pods_on(self, node_name: str) -> list[Pod]:
        return [pod for pod, node in self._pods.values() if node == node_name]

    def entries(self) -> dict[str, tuple[Pod, str]]:
        """A copy, for the executor."""
        return dict(self._pods)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    def __len__(self) -> int:
        return len(self._pods)


def with_nominated(snapshot: Snapshot, pod: Pod, nominated: Mapping[str, tuple[Pod, str]]) -> Snapshot:
    """`snapshot` with the pods nominated to its nodes that `pod` must leave room for: those of
    equal or higher priority, other than `pod` itself."""
    view = snapshot
    for other, node_name in nominated.values():
        if other.uid == pod.uid or other.priority < pod.priority:
            continue
        info = view.get(node_name)
        if info is not None and other.uid not in info.pods:  # not already placed there
            view = view.with_pod_on(replace(other, node_name=node_name), node_name)
    return view
