"""Which listed pods the start-up may queue after scheduling has started (app/startup.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.app.startup import may_wait
from kubesched.model.podgroup import LEGACY_POD_GROUP_LABEL, POD_GROUP_LABEL


def _pod(**parts: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {"metadata": {"name": "p", "uid": "u"}, "spec": {}, "status": {"phase": "Pending"}}
    for part, value in parts.items():
        pod[part].update(value)
    return pod


def test_a_plain_pending_pod_may_wait() -> None:
    assert may_wait(_pod())
    assert may_wait({"metadata": {"uid": "u"}})  # missing parts are not an error
    assert may_wait(_pod(metadata={"labels": {"app": "web"}}, status={"nominatedNodeName": ""}))


@pytest.mark.parametrize(
    ("why", "pod"),
    [
        ("bound: its node's usage", _pod(spec={"nodeName": "n1"})),
        ("nominated: holds room on its node", _pod(status={"nominatedNodeName": "n1"})),
        ("terminating", _pod(metadata={"deletionTimestamp": "2026-01-01T00:00:00Z"})),
        ("a gang member: counted against minMember", _pod(metadata={"labels": {POD_GROUP_LABEL: "g"}})),
        ("a gang member, older label", _pod(metadata={"labels": {LEGACY_POD_GROUP_LABEL: "g"}})),
    ],
)
def test_a_pod_a_decision_depends_on_is_fed_before_scheduling_starts(why: str, pod: dict[str, Any]) -> None:
    assert not may_wait(pod), why
