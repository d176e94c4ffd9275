"""A scheduler starting on a healthy cluster logs nothing at warning level.

In particular no watch is started for policy/v1 PodDisruptionBudgets, which Kubernetes 1.20 does not
serve: the scheduler asks the server which API versions it serves and watches only those; and
Kopf, which watches the SchedulerPolicies alone, resolves them without a warning.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from .kubesched_process import KubeschedProcess
from .test_policies import Policies

NOISY = ("warning", "error", "critical")


async def test_start_up_logs_no_warning(
    control_plane: Any, namespace: str, tmp_path: Path, policies: Policies
) -> None:
    # At debug level Kopf reports each event it handles: a handled event means that its watch
    # runs, so that it has resolved its resource (and would have warned by then).
    args = ["--log-level", "debug"]
    name = f"ks-{namespace}"
    with KubeschedProcess(control_plane.kubeconfig, name, tmp_path, args) as proc:
        proc.wait_for_log("scheduler_started")
        await policies.create(name, {"schedulerName": name})
        proc.wait_for_log("Handler 'build_registry.<locals>._policy'")
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
    # A late event loop is the machine's load (CI shares two cores with the control plane), not a fault.
    noisy = [e for e in events if e.get("level") in NOISY and e["event"] != "event_loop_blocked"]
    assert noisy == [], "\n".join(started)
    # The discovery of the served API versions worked: only those are watched.
    assert not [e for e in events if e["event"] in ("api_discovery_failed", "api_not_served")]
