"""Pods nominated to a node by preemption, holding their room there while their victims terminate.

kube-scheduler 1.20 keeps them in the scheduling queue's PodNominator
(internal/queue/scheduling_queue.go, nominatedPodMap). Here the scheduler keeps them on the event
loop and hands a copy to each batch, where kubesched.algorithm.batch.with_nominated places them in
the snapshot each pod sees.
"""

from __future__ import annotations

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
