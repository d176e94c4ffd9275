"""CheckNodeLabelPresence (plugin NodeLabel, filter part): custom predicates with a `labelsPresence`
argument require labels to exist (`presence: true`) or not to exist on a node, whatever their value.

Every such entry of a policy feeds one filter, as 1.20 configures one NodeLabel plugin with the
present and absent labels of all of them; a label both required and forbidden is a policy error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self

from kubesched.model.nodeinfo import NodeInfo
from kubesched.model.objects import Pod
from kubesched.model.shape import boolean, known_fields
from kubesched.plugins.arguments import ArgumentError, label_list
from kubesched.plugins.framework import FITS, Predicate

ERR_REASON_PRESENCE_VIOLATED = "node(s) didn't have the requested labels"


def check_no_conflict(present: Sequence[str], absent: Sequence[str]) -> None:
    """validateNoConflict: a label may not be both wanted and unwanted."""
    wanted = set(present)
    for label in absent:
        if label in wanted:
            raise ArgumentError(
                "",
                f"detecting at least one label (e.g., {label!r}) that exist in both the present"
                f"({list(present)}) and absent({list(absent)}) label list",
            )


class LabelPresence:
    """Labels a node should have (`present`) or lack (`absent`): what both halves of the NodeLabel
    plugin are configured with."""

    def __init__(self, present: Sequence[str] = (), absent: Sequence[str] = ()) -> None:
        check_no_conflict(present, absent)
        self.present = tuple(present)
        self.absent = tuple(absent)

    def joined(self, other: object) -> Self:
        """The labels of both policy entries, as 1.20 configures one NodeLabel plugin for all."""
        assert isinstance(other, type(self))
        return type(self)(self.present + other.present, self.absent + other.absent)


class CheckNodeLabelPresence(LabelPresence, Predicate):
    name = "CheckNodeLabelPresence"
    unresolvable_reasons = frozenset({ERR_REASON_PRESENCE_VIOLATED})

    @classmethod
    def from_argument(cls, argument: Mapping[str, Any]) -> CheckNodeLabelPresence:
        """One policy entry's `labelsPresence`: {"labels": [...], "presence": true|false}."""
        known_fields(argument, ("labels", "presence"))
        labels = label_list(argument.get("labels"), "labels")
        if boolean(argument.get("presence", False), "presence"):
            return cls(present=labels)
        return cls(absent=labels)

    def merge(self, other: Predicate) -> Predicate:
        return self.joined(other)

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        labels = node.node.labels
        for label in self.present:
            if label not in labels:
                return (ERR_REASON_PRESENCE_VIOLATED,)
        for label in self.absent:
            if label in labels:
                return (ERR_REASON_PRESENCE_VIOLATED,)
        return FITS
