"""The shapes every predicate and priority takes, after kube-scheduler's framework plugins.

A predicate answers per node with the reasons it does not fit (empty: it fits). A priority
scores each feasible node 0..MAX_NODE_SCORE and may normalise the scores across nodes.
Both may precompute per pod once (`prefilter` / `prescore`), so per-node work stays small.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Final

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod

MAX_NODE_SCORE = 100
FITS: tuple[str, ...] = ()


class _Skip:
    def __repr__(self) -> str:
        return "SKIP"


# Returned by `prefilter` when the pod passes this predicate on every node (no ports, no volumes,
# no selector...): the algorithm then never calls `filter`, which keeps the per-node loop short.
SKIP: Final = _Skip()


class Predicate:
    """A filter. Subclasses set `name` (the legacy Policy name) and implement `filter`."""

    name: ClassVar[str]

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        """Per-pod state handed to every `filter` call of this cycle, or SKIP when every node passes."""
        return None

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        """The reasons `pod` cannot go to `node`; empty when it fits."""
        raise NotImplementedError


class Priority:
    """A scorer. Subclasses set `name` (the legacy Policy name) and implement `score`."""

    name: ClassVar[str]

    def prescore(self, pod: Pod, snapshot: Snapshot, nodes: Sequence[NodeInfo]) -> Any:
        """Per-pod state handed to every `score` call of this cycle; `nodes` are the feasible ones."""
        return None

    def score(self, pod: Pod, state: Any, node: NodeInfo) -> int:
        raise NotImplementedError

    def normalize(self, pod: Pod, state: Any, nodes: Sequence[NodeInfo], scores: list[int]) -> None:
        """Rescale `scores` (aligned with `nodes`) in place; most priorities need nothing."""
