"""NodeLabel (plugin NodeLabel, score part): custom priorities with a `labelPreference` argument
favour nodes that have (`presence: true`) or lack a label.

Every such entry of a policy feeds one priority, as 1.20 configures one NodeLabel plugin: a node
scores 100 for each preference it meets, divided by the number of preferences, and the priority
weighs the common weight of the entries times their number (1.20 requires equal weights).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.model.nodeinfo import NodeInfo
from kubesched.model.objects import Pod
from kubesched.model.shape import boolean, known_fields, string
from kubesched.plugins.framework import MAX_NODE_SCORE, Priority
from kubesched.plugins.node_label.filtering import LabelPresence


class NodeLabelPriority(LabelPresence, Priority):
    name = "NodeLabel"
    plugin = "NodeLabel"
    weight_rule = "sum"

    @classmethod
    def from_argument(cls, argument: Mapping[str, Any]) -> NodeLabelPriority:
        """One entry's `labelPreference`: {"label": "...", "presence": true|false}."""
        known_fields(argument, ("label", "presence"))
        label = string(argument.get("label"), "label")
        if boolean(argument.get("presence", False), "presence"):
            return cls(present=(label,))
        return cls(absent=(label,))

    def merge(self, other: Priority) -> Priority:
        return self.joined(other)

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        labels = node.node.labels
        total = sum(MAX_NODE_SCORE for label in self.present if label in labels)
        total += sum(MAX_NODE_SCORE for label in self.absent if label not in labels)
        return total // (len(self.present) + len(self.absent))
