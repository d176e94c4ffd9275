"""Run `kubesched run` as a real process against the test control plane."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType


class KubeschedProcess:
    """A `kubesched run` subprocess with its log in a file, stopped with SIGTERM (then SIGKILL)."""

    def __init__(
        self,
        kubeconfig: Path | str,
        scheduler_name: str,
        log_dir: Path,
        args: Sequence[str] = (),
        *,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """`name` tells replicas of one scheduler apart (log file; POD_NAME, so election identity)."""
        self.kubeconfig = str(kubeconfig)
        self.scheduler_name = scheduler_name
        self.name = name or scheduler_name
        self.log_path = log_dir / f"kubesched-{self.name}.log"
        self.args = list(args)
        self.env = {**(env or {}), **({"POD_NAME": name} if name else {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> KubeschedProcess:
        command = [
            sys.executable, "-m", "kubesched", "run",
            "--kubeconfig", self.kubeconfig,
            "--scheduler-name", self.scheduler_name,
            "--metrics-port", "0",
            "--kube-api-qps", "0",
            "--log-format", "json",
            *self.args,
        ]  # fmt: skip
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **self.env}
        )
        log.close()
        return self

    def stop(self, grace: float = 15.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_for_log(self, needle: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log():
                return
            if not self.alive:
                raise AssertionError(f"kubesched exited before logging {needle!r}:\n{self.log()[-4000:]}")
            time.sleep(0.1)
        raise AssertionError(f"kubesched did not log {needle!r} within {timeout}s:\n{self.log()[-4000:]}")

    def __enter__(self) -> KubeschedProcess:
        return self.start()

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.stop()
