"""The schedulers under test, as command lines, and their processes (always killed in the end)."""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

NULL = "null"
KUBE_SCHEDULER = "kube-scheduler"
KUBESCHED = "kubesched"
ALL = (NULL, KUBE_SCHEDULER, KUBESCHED)
# kubesched again, on the gang workload's pods in PodGroups (`kubesched` there: the same pods without).
KUBESCHED_GANGS = "kubesched-gangs"
# kubesched again, on the quota workload's pods under ElasticQuotas (`kubesched` there: without).
KUBESCHED_QUOTAS = "kubesched-quotas"
# kubesched at its default node sampling (kube-scheduler's adaptive percentage), where `kubesched`
# scores every node when its `run` offers the flag. The constraint classes run both.
KUBESCHED_SAMPLED = "kubesched-sampled"
KNOWN = (*ALL, KUBESCHED_SAMPLED)
LABELS = {
    NULL: "null binder",
    KUBE_SCHEDULER: "kube-scheduler 1.20.2",
    KUBESCHED: "kubesched",
    KUBESCHED_GANGS: "kubesched, PodGroups",
    KUBESCHED_QUOTAS: "kubesched, ElasticQuotas",
    KUBESCHED_SAMPLED: "kubesched, default sampling",
}

BENCH_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = BENCH_DIR.parent
DEFAULT_POLICY = REPO_ROOT / "examples" / "policies" / "seed-policy.json"
# kube-scheduler 1.20's default predicates and priorities, written out: the constraint classes' policy.
DEFAULT_CLASS_POLICY = REPO_ROOT / "examples" / "policies" / "default-1.20-policy.json"
KUBE_SCHEDULER_FLAGS = (
    "--kubeconfig",
    "--policy-config-file",
    "--use-legacy-policy-config",
    "--leader-elect",
    "--kube-api-qps",
    "--kube-api-burst",
    "--port",
    "--secure-port",
    "--bind-address",
    "--authentication-skip-lookup",
    "--scheduler-name",
)


class SetupError(RuntimeError):
    """A scheduler cannot be run as configured (missing binary, unknown flag)."""


def compile_bytecode(python: str) -> None:
    """Compile kubesched's modules, as `pip install` does for the image. A checkout installed in
    editable mode under PYTHONDONTWRITEBYTECODE would compile every module at every start (importing
    kubesched.app.run: 1.6 s against 1.2 s compiled), and no installed kubesched pays that."""
    code = (
        "import compileall, os, sys, kubesched;"
        "sys.exit(not compileall.compile_dir(os.path.dirname(kubesched.__file__), quiet=1))"
    )
    if subprocess.run([python, "-c", code], capture_output=True, timeout=300).returncode:
        raise SetupError("could not compile kubesched's bytecode")


@dataclass(frozen=True, slots=True)
class KubeschedFlags:
    """What this checkout's `kubesched run --help` offers beyond the basics."""

    leader_elect: list[str] = field(default_factory=list)
    score_all_nodes: list[str] = field(default_factory=list)

    @classmethod
    def detect(cls, python: str) -> KubeschedFlags:
        """Read `kubesched run --help`: flags are being added while this harness exists."""
        help_text = _help([python, "-m", "kubesched", "run", "--help"], "kubesched run --help")
        leader: list[str] = []
        if re.search(r"--leader-elect\s*/\s*--no-leader-elect", help_text):
            leader = ["--no-leader-elect"]
        elif "--leader-elect" in help_text:
            leader = ["--leader-elect=false"]
        score: list[str] = []
        percentage = re.search(r"(--[a-z0-9-]*percentage[a-z0-9-]*)", help_text)
        if percentage:
            score = [f"{percentage.group(1)}=100"]
        return cls(leader, score)


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """How every scheduler is started: the same client rate limits and the same Policy file."""

    kube_api_qps: float
    kube_api_burst: int
    policy_file: Path
    kube_scheduler_bin: Path
    python: str = sys.executable
    null_concurrency: int = 64
    kubesched_flags: KubeschedFlags = field(default_factory=KubeschedFlags)
    kubesched_extra: tuple[str, ...] = ()
    kube_scheduler_extra: tuple[str, ...] = ()
    class_policy_file: Path = DEFAULT_CLASS_POLICY  # the constraint classes' Policy, for every scheduler

    def check(self, kinds: list[str], policies: list[Path] | None = None) -> None:
        """Fail early, before a control plane starts, if a scheduler could not run."""
        for policy in policies or [self.policy_file]:
            if not policy.is_file():
                raise SetupError(f"no Policy file at {policy}")
        if KUBE_SCHEDULER in kinds:
            if not os.access(self.kube_scheduler_bin, os.X_OK):
                raise SetupError(f"no kube-scheduler at {self.kube_scheduler_bin} (run `make k8s`)")
            help_text = _help([str(self.kube_scheduler_bin), "--help"], "kube-scheduler --help")
            missing = [f for f in KUBE_SCHEDULER_FLAGS if not re.search(rf"{f}\b", help_text)]
            if missing:
                raise SetupError(f"kube-scheduler does not accept {missing}")

    def command(
        self, kind: str, kubeconfig: Path, scheduler_name: str, policy_file: Path | None = None
    ) -> list[str]:
        """The command line of `kind`, with `policy_file` instead of the configured one if given."""
        qps, burst = self.kube_api_qps, self.kube_api_burst
        policy = policy_file or self.policy_file
        if kind == NULL:
            return [
                self.python, str(BENCH_DIR / "nullbinder.py"),
                "--kubeconfig", str(kubeconfig),
                "--scheduler-name", scheduler_name,
                "--concurrency", str(self.null_concurrency),
                "--kube-api-qps", str(qps),
                "--kube-api-burst", str(burst),
            ]  # fmt: skip
        if kind == KUBE_SCHEDULER:
            return [
                str(self.kube_scheduler_bin),
                f"--kubeconfig={kubeconfig}",
                f"--policy-config-file={policy}",
                "--use-legacy-policy-config=true",
                "--leader-elect=false",
                f"--kube-api-qps={qps:g}",
                f"--kube-api-burst={burst}",
                "--port=0",
                f"--secure-port={free_port()}",
                "--bind-address=127.0.0.1",
                "--authentication-skip-lookup=true",
                f"--scheduler-name={scheduler_name}",
                *self.kube_scheduler_extra,
            ]
        if kind in (KUBESCHED, KUBESCHED_GANGS, KUBESCHED_QUOTAS, KUBESCHED_SAMPLED):
            return [
                self.python, "-m", "kubesched", "run",
                "--kubeconfig", str(kubeconfig),
                "--scheduler-name", scheduler_name,
                "--policy-config-file", str(policy),
                "--kube-api-qps", f"{qps:g}",
                "--kube-api-burst", str(burst),
                "--metrics-port", str(free_port()),  # the harness reads the event loop's lag there
                "--log-level", "warning",
                *self.kubesched_flags.leader_elect,
                *(self.kubesched_flags.score_all_nodes if kind != KUBESCHED_SAMPLED else ()),
                *self.kubesched_extra,
            ]  # fmt: skip
        raise ValueError(f"unknown scheduler {kind!r}")


class SchedulerProcess:
    """One scheduler run as a child in its own process group, with its output in a log file."""

    _live: set[SchedulerProcess] = set()

    def __init__(self, kind: str, argv: list[str], log_file: Path) -> None:
        self.kind = kind
        self.argv = argv
        self.log_file = log_file
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with log_file.open("ab") as log:
            log.write(("$ " + " ".join(argv) + "\n").encode())
            log.flush()
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: a Ctrl-C reaches the harness, which stops it
                cwd=REPO_ROOT,
            )
        self.started = time.monotonic()
        SchedulerProcess._live.add(self)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def exit_code(self) -> int | None:
        return self.popen.poll()

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM its process group, SIGKILL after `grace` seconds; returns the exit code."""
        SchedulerProcess._live.discard(self)
        if self.popen.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(10.0)
        # Children it may have left behind in its session go too, each by its pid.
        for pid in _session_members(self.popen.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        return self.popen.poll()

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)

    @classmethod
    def stop_all(cls) -> None:
        for process in list(cls._live):
            process.stop(grace=3.0)


atexit.register(SchedulerProcess.stop_all)


def _session_members(sid: int) -> list[int]:
    """Pids of the processes in session `sid` (the one `start_new_session` gave a scheduler)."""
    members = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
            # Fields 4 (ppid), 5 (pgrp), 6 (session) of /proc/<pid>/stat.
            if int(fields[3]) == sid and fields[0] != "Z":
                members.append(int(stat_file.parent.name))
    return members


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kube_scheduler_version(binary: Path) -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
        return (out.stdout or out.stderr).strip()
    return "unknown"


def _help(argv: list[str], what: str) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    except (OSError, subprocess.SubprocessError) as e:
        raise SetupError(f"{what} failed: {e}") from e
    text = out.stdout + out.stderr
    if out.returncode != 0 and "Usage" not in text:
        raise SetupError(f"{what} exited with {out.returncode}: {text[-500:]}")
    return text
