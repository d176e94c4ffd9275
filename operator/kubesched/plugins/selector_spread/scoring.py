"""SelectorSpreadPriority, alias ServiceSpreadingPriority, as the SelectorSpread plugin scores it.

Spreads the pods of one Service, ReplicationController, ReplicaSet or StatefulSet over nodes and
zones: a node scores by how few matching pods it already runs, blended 1/3 node, 2/3 zone when
nodes carry zone labels. Pods with topologySpreadConstraints are left to PodTopologySpread and
score 0 here, as in 1.20.

kube-scheduler 1.20 runs this plugin for the legacy names only with the DefaultPodTopologySpread
feature gate off; by default (gate on) the names mean PodTopologySpread with system default
constraints (plugins/pod_topology_spread/scoring.py). `from_settings` picks one or the other from
the same gate (`PluginSettings.default_pod_topology_spread`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.selectors import LabelSelector
from kubesched.model.table import IntArray, NodeTable
from kubesched.plugins.framework import MAX_NODE_SCORE, PluginSettings, Priority
from kubesched.plugins.helper import default_selector, snapshot_default_selector
from kubesched.plugins.pod_topology_spread.scoring import spread_priority

ZONE_WEIGHTING = 2.0 / 3.0


def count_matching_pods(namespace: str, selector: LabelSelector, node: NodeInfo) -> int:
    """Pods of the namespace on the node that the selector matches, not counting terminating ones."""
    if not node.pods or selector.empty:
        return 0
    count = 0
    for p in node.pods.values():
        if p.namespace == namespace and not p.deleting and selector.matches(p.labels):
            count += 1
    return count


class SelectorSpreadPriority(Priority):
    name = "SelectorSpreadPriority"
    plugin = "SelectorSpread"

    @classmethod
    def from_settings(cls, settings: PluginSettings) -> Priority:
        """This plugin with the DefaultPodTopologySpread gate off; on, PodTopologySpread with the
        system default constraints."""
        if settings.default_pod_topology_spread:
            return spread_priority(settings, system_defaults=True)
        return cls()

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        if pod.spec.get("topologySpreadConstraints"):
            return None
        return snapshot_default_selector(pod, snapshot)

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        if state is None:
            return 0
        return count_matching_pods(pod.namespace, state, node)

    def normalize(self, pod: Pod, state: Any, nodes: Sequence[NodeInfo], scores: list[int]) -> None:
        if state is None:
            return
        if not any(scores):
            # No matching pod anywhere: every node and zone score is 100 (Go's blend of 100 and 100
            # is exactly 100.0 too), so skip the zone keys. The common case for a lone pod.
            scores[:] = [MAX_NODE_SCORE] * len(scores)
            return
        zones = [node.node.zone_key for node in nodes]
        counts_by_zone: dict[str, int] = {}
        for zone, count in zip(zones, scores, strict=True):
            if zone:
                counts_by_zone[zone] = counts_by_zone.get(zone, 0) + count
        max_by_node = max(scores, default=0)
        max_by_zone = max(counts_by_zone.values(), default=0)
        max_score = float(MAX_NODE_SCORE)
        # Float arithmetic in Go's order of operations, truncated to an integer at the end.
        for i, count in enumerate(scores):
            f_score = max_score
            if max_by_node > 0:
                f_score = max_score * (float(max_by_node - count) / float(max_by_node))
            zone = zones[i]
            if counts_by_zone and zone:
                zone_score = max_score
                if max_by_zone > 0:
                    zone_score = max_score * (float(max_by_zone - counts_by_zone[zone]) / float(max_by_zone))
                f_score = (f_score * (1.0 - ZONE_WEIGHTING)) + (ZONE_WEIGHTING * zone_score)
            scores[i] = int(f_score)

    def score_nodes(
        self, pod: Pod, snapshot: Snapshot, table: NodeTable, rows: IntArray, nodes: Sequence[NodeInfo]
    ) -> IntArray | None:
        """score and normalize over arrays, in the same float64 operations; the matching pods
        counted once per distinct label set (NodeUsage.selected)."""
        selector = self.prescore(pod, snapshot, nodes)
        if selector is None:
            return np.zeros(len(rows), dtype=np.int64)
        if selector.empty:
            return np.full(len(rows), MAX_NODE_SCORE, dtype=np.int64)
        counts = table.usage.selected(pod.namespace, selector)[rows]
        if not counts.any():
            return np.full(len(rows), MAX_NODE_SCORE, dtype=np.int64)
        max_score = float(MAX_NODE_SCORE)
        max_by_node = float(counts.max())
        f_score = max_score * ((max_by_node - counts) / max_by_node)
        codes, keys = table.columns.zone_codes()
        zones = codes[rows]
        zoned = zones >= 0
        if zoned.any():
            by_zone = np.bincount(zones[zoned], weights=counts[zoned], minlength=len(keys))
            max_by_zone = float(by_zone[np.unique(zones[zoned])].max())
            zone_score = (
                max_score * ((max_by_zone - by_zone[zones]) / max_by_zone)
                if max_by_zone > 0
                else np.full(len(rows), max_score)
            )
            blended = (f_score * (1.0 - ZONE_WEIGHTING)) + (ZONE_WEIGHTING * zone_score)
            f_score = np.where(zoned, blended, f_score)
        scores: IntArray = f_score.astype(np.int64)
        return scores


__all__ = ["SelectorSpreadPriority", "count_matching_pods", "default_selector"]
