"""ImageLocalityPriority (plugin ImageLocality): favours nodes that already have the pod's container
images, by their size, each image's size scaled by the share of nodes that have it (so an image
everywhere counts little), between 23 MB and 1000 MB per container. Init containers are not
counted; an image without a tag is looked up as `:latest`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.table import IntArray, NodeTable
from kubesched.plugins.framework import MAX_NODE_SCORE, Priority

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """normalizedImageName: add ":latest" when the name has no tag."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    sum_scores = min(max(sum_scores, MIN_THRESHOLD), max_threshold)
    return MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


class ImageLocalityPriority(Priority):
    name = "ImageLocalityPriority"
    plugin = "ImageLocality"

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        containers = pod.spec.get("containers") or []
        images = [normalized_image_name(str((c or {}).get("image") or "")) for c in containers]
        total = len(snapshot.nodes)
        # Each image's spread (share of all nodes having it), looked up once per pod.
        spread = {image: snapshot.image_node_count(image) / total for image in set(images)} if total else {}
        return images, spread, len(containers)

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        images, spread, containers = state
        node_images = node.node.images
        total = 0
        for image in images:
            size = node_images.get(image)
            if size is not None:
                total += int(float(size) * spread[image])
        return calculate_priority(total, containers)

    def score_nodes(
        self, pod: Pod, snapshot: Snapshot, table: NodeTable, rows: IntArray, nodes: Sequence[NodeInfo]
    ) -> IntArray | None:
        images, spread, containers = self.prescore(pod, snapshot, nodes)
        totals = np.zeros(len(rows), dtype=np.int64)
        for image in images:
            sizes, present = table.columns.image_sizes(image)
            # int(float(size) * spread) per image, then summed, as `score` does.
            totals += np.where(present[rows], (sizes[rows] * spread[image]).astype(np.int64), 0)
        max_threshold = MAX_CONTAINER_THRESHOLD * containers
        clipped = np.minimum(np.maximum(totals, MIN_THRESHOLD), max_threshold)
        scores: IntArray = MAX_NODE_SCORE * (clipped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)
        return scores
