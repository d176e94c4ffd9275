"""Long-running child processes in their own session, addressable by pid alone.

A process is known by its pid so that one started by `devcluster up` (a process that has since
exited) can be stopped by `devcluster down`; when we started it in this process we also hold its
Popen, to reap it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ManagedProcess:
    """One server process: etcd or kube-apiserver."""

    name: str
    pid: int
    log_file: Path
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @classmethod
    def spawn(cls, name: str, argv: Sequence[str], log_file: Path) -> ManagedProcess:
        """Start `argv` with stdout and stderr appended to `log_file`.

        Its own session: a Ctrl-C in the terminal goes to the foreground process group, so it reaches
        pytest (which then stops the control plane in order) and not the servers mid-test.
        """
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(log_file, "ab") as log:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return cls(name=name, pid=popen.pid, log_file=log_file, popen=popen)

    def alive(self) -> bool:
        """Whether the process still runs (a zombie counts as dead)."""
        if self.popen is not None:
            return self.popen.poll() is None
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        # The state letter follows the parenthesised command name, which may itself hold spaces.
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    def runs(self, executable_name: str) -> bool:
        """Whether the pid is still this process (and not a recycled pid of something else)."""
        try:
            argv0 = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            return False
        return self.alive() and Path(os.fsdecode(argv0)).name == executable_name

    def send(self, sig: signal.Signals) -> None:
        """Send `sig` to the process, ignoring one that is already gone."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def terminate(self, grace: float) -> None:
        """SIGTERM, then SIGKILL if still running after `grace` seconds; waits until it is gone."""
        if not self.alive():
            self._reap()
            return
        self.send(signal.SIGCONT)  # a paused process would not act on SIGTERM until resumed
        self.send(signal.SIGTERM)
        if not self._wait(grace):
            self.send(signal.SIGKILL)
            self._wait(10.0)
        self._reap()

    def exit_code(self) -> int | None:
        """The exit status, when we are its parent and it has exited."""
        return None if self.popen is None else self.popen.poll()

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of its log, for error messages."""
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def _reap(self) -> None:
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=1.0)
