"""The base policy a scheduler runs (its --policy-config-file, else the built-in default), published
as annotations on the Lease its leader holds, so that `explain` judges with the same policy.

The leader writes them in the Lease updates it makes anyway (no request of its own, no permission
beyond the Lease's); they change only when the leader does. A follower taking over writes its own:
the Lease describes whichever replica leads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kubesched.policy.compile import parse_policy_text

SCHEDULER_ANNOTATION: Final = "kubesched.io/scheduler-name"
SOURCE_ANNOTATION: Final = "kubesched.io/policy-source"
CONTENT_ANNOTATION: Final = "kubesched.io/policy"
DEFAULT_SOURCE: Final = "built-in default (kube-scheduler 1.20)"
# Every renewal (each retry period) rewrites the Lease, content included; a legacy Policy naming
# every predicate and priority is about 2 KB, so a larger one is left out rather than rewritten.
MAX_CONTENT: Final = 32 * 1024


def lease_annotations(scheduler_name: str, policy_file: str | Path | None, text: str) -> dict[str, str]:
    """What the leader writes on its Lease: its scheduler name, the base policy's source and, when
    it is a file of at most MAX_CONTENT bytes, its text."""
    found = {SCHEDULER_ANNOTATION: scheduler_name}
    if policy_file is None:
        found[SOURCE_ANNOTATION] = DEFAULT_SOURCE
        return found
    size = len(text.encode())
    if size > MAX_CONTENT:
        found[SOURCE_ANNOTATION] = f"{policy_file} (not published: {size} bytes, over {MAX_CONTENT})"
    else:
        found[SOURCE_ANNOTATION] = str(policy_file)
        found[CONTENT_ANNOTATION] = text
    return found


@dataclass(frozen=True, slots=True)
class PublishedPolicy:
    """A scheduler's base policy as its Lease tells it."""

    lease: str  # namespace/name
    holder: str  # "" when no replica holds the Lease now (released)
    source: str  # the policy file's name, or DEFAULT_SOURCE
    policy: dict[str, Any] | None  # the parsed file; None: the built-in default, or not published
    default: bool  # the scheduler runs the built-in default

    @property
    def known(self) -> bool:
        return self.default or self.policy is not None


def published_policy(leases: Sequence[Mapping[str, Any]], scheduler_name: str) -> PublishedPolicy | None:
    """What the Lease of `scheduler_name`'s leader publishes; when several do (a stale one left in
    another namespace), the one held, renewed last. Raises PolicyError for content that does not parse."""
    found = []
    for lease in leases:
        meta = lease.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        if annotations.get(SCHEDULER_ANNOTATION) != scheduler_name or SOURCE_ANNOTATION not in annotations:
            continue
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        found.append((bool(holder), str(spec.get("renewTime") or ""), meta, annotations, holder))
    if not found:
        return None
    _, _, meta, annotations, holder = max(found, key=lambda f: f[:2])
    key = f"{meta.get('namespace')}/{meta.get('name')}"
    source = str(annotations[SOURCE_ANNOTATION])
    text = annotations.get(CONTENT_ANNOTATION)
    policy = None if text is None else parse_policy_text(str(text), source)
    return PublishedPolicy(key, holder, source, policy, source == DEFAULT_SOURCE)
