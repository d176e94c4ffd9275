"""The process's lifecycle on a real API server: a failure at any step of the start-up closes what
had started (no task, thread, socket or listening port left behind) and is told in one line; a
normal stop does the same.

`run_scheduler` runs in the test's own process, so that what it leaves behind can be counted."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kubesched.app import run as run_module
from kubesched.app.run import StartupError, run_scheduler
from kubesched.app.settings import RunSettings
from kubesched.kube.informer import Informer
from kubesched.policy.controller import PolicyController
from kubesched.telemetry.http_server import Endpoints
from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.fixtures import wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def settings_for(kubeconfig: Path | str, port: int) -> RunSettings:
    base = RunSettings.from_flags(
        {
            "kubeconfig": str(kubeconfig),
            "scheduler_name": f"lifecycle-{port}",
            "leader_elect": False,
            "metrics_port": port,
            "cache_reconcile_interval": 1.0,
        }
    )
    return replace(base)


def sockets() -> set[str]:
    """The sockets this process holds open (their inodes)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


class Leftovers:
    """What the process holds before a run, to compare with what it holds after."""

    def __init__(self) -> None:
        self.tasks = asyncio.all_tasks()
        self.threads = {t.ident for t in threading.enumerate()}
        self.sockets = sockets()

    def now(self) -> dict[str, Any]:
        gc.collect()  # closed sockets whose objects linger in cycles
        return {
            "tasks": sorted(t.get_name() for t in asyncio.all_tasks() - self.tasks),
            "threads": sorted(t.name for t in threading.enumerate() if t.ident not in self.threads),
            "sockets": sorted(sockets() - self.sockets),
        }

    async def none_left(self) -> None:
        seen: list[dict[str, Any]] = []

        async def clean() -> bool:
            seen.append(self.now())
            return not any(seen[-1].values())

        # Threads end and sockets close a moment after being told to: wait, within bounds.
        try:
            await wait_for(clean, timeout=20, interval=0.1, message="left behind")
        except TimeoutError:
            raise AssertionError(f"left behind: {seen[-1]}") from None


def fail(message: str) -> Callable[..., Any]:
    async def failing(*_: Any, **__: Any) -> Any:
        raise RuntimeError(message)

    return failing


# Each start step, failed by replacing what it calls: (name, target, attribute, the words expected).
STEPS = [
    ("metrics server", Endpoints, "start", "serving metrics on port"),
    ("policies", PolicyController, "load", "loading the SchedulerPolicies from https://"),
    ("listing", Informer, "list", "listing the cluster from https://"),
    ("kopf", run_module, "import_kopf_wiring", "loading Kopf"),
]


@pytest.fixture
def no_gc_held() -> Iterator[None]:
    yield
    assert gc.isenabled(), "the collector was left disabled"


@pytest.mark.parametrize(("name", "target", "attribute", "words"), STEPS, ids=[s[0] for s in STEPS])
async def test_a_failed_start_step_closes_what_started_and_says_so_in_one_line(
    control_plane: LocalControlPlane,
    monkeypatch: pytest.MonkeyPatch,
    no_gc_held: None,
    name: str,
    target: Any,
    attribute: str,
    words: str,
) -> None:
    port = free_port()
    before = Leftovers()
    if attribute == "import_kopf_wiring":

        def broken() -> None:
            raise RuntimeError(f"{name} broke")

        monkeypatch.setattr(target, attribute, broken)
    else:
        monkeypatch.setattr(target, attribute, fail(f"{name} broke"))
    with pytest.raises(StartupError) as caught:
        await run_scheduler(settings_for(control_plane.kubeconfig, port))
    message = str(caught.value)
    assert words in message and f"{name} broke" in message, message
    assert "\n" not in message
    await before.none_left()
    assert port_is_free(port), f"port {port} still listening after the failed start"


async def test_a_normal_stop_closes_everything(control_plane: LocalControlPlane, no_gc_held: None) -> None:
    """SIGTERM's path (the stop event) after a full start: Kopf, watches, writers and the server all close."""
    port = free_port()
    before = Leftovers()
    running = asyncio.create_task(run_scheduler(settings_for(control_plane.kubeconfig, port)))
    kopf_started: list[str] = []

    async def started() -> bool:
        kopf_started[:] = [t.get_name() for t in asyncio.all_tasks() if t.get_name() == "kopf"]
        return bool(kopf_started) or running.done()

    await wait_for(started, timeout=60, interval=0.1, message="Kopf started")
    assert not running.done(), running
    os.kill(os.getpid(), __import__("signal").SIGTERM)
    await asyncio.wait_for(running, timeout=60)
    await before.none_left()
    assert port_is_free(port)


@pytest.mark.parametrize(
    ("case", "kubeconfig", "words"),
    [
        ("no server there", "unreachable", "https://127.0.0.1:"),
        ("not YAML", "not-yaml", "the kubeconfig"),
        ("no current context", "no-context", "the kubeconfig"),
    ],
)
async def test_bad_connection_settings_fail_in_one_line(
    tmp_path: Path, no_gc_held: None, case: str, kubeconfig: str, words: str
) -> None:
    path = tmp_path / "kubeconfig"
    closed = free_port()
    texts = {
        "unreachable": (
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{closed}', "
            "insecure-skip-tls-verify: true}}]\n"
            "users: [{name: c, user: {token: t}}]\n"
            "contexts: [{name: c, context: {cluster: c, user: c}}]\n"
        ),
        "not-yaml": "apiVersion: v1\nclusters: [\n  {oops\n",
        "no-context": "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n",
    }
    path.write_text(texts[kubeconfig])
    before = Leftovers()
    with pytest.raises(StartupError) as caught:
        await run_scheduler(settings_for(path, free_port()))
    message = str(caught.value)
    assert words in message and "\n" not in message, message
    await before.none_left()
