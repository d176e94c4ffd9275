"""A scheduler starting on a healthy cluster logs nothing at warning level.

In particular Kopf does not warn "Unresolved resources cannot be served" about policy/v1
PodDisruptionBudgets, which Kubernetes 1.20 does not serve: the scheduler asks the server which
API versions it serves and hands Kopf only those.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from .kubesched_process import KubeschedProcess

NOISY = ("warning", "error", "critical")


async def test_start_up_logs_no_warning(control_plane: Any, namespace: str, tmp_path: Path) -> None:
    # At debug level Kopf reports each event it handles: a handled event means that its watches
    # run, so that it has resolved its resources (and would have warned by then).
    args = ["--log-level", "debug"]
    with KubeschedProcess(control_plane.kubeconfig, f"ks-{namespace}", tmp_path, args) as proc:
        proc.wait_for_log("scheduler_started")
        proc.wait_for_log("Handler '_watch_object")
        await asyncio.sleep(1.0)  # anything Kopf says right after its first events
        lines = proc.log().splitlines()
    started = lines[: next((i for i, line in enumerate(lines) if '"shutting_down"' in line), len(lines))]
    assert not [line for line in lines if "Unresolved resources" in line]
    events = []
    for line in started:
        try:
            events.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not a JSON log event (a stray warning?): {line}") from None
    assert [e for e in events if e.get("level") in NOISY] == [], "\n".join(started)
    # The discovery of the served API versions worked: Kopf watches only those.
    assert not [e for e in events if e["event"] == "api_discovery_failed"]
