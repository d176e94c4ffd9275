"""A real kube-apiserver 1.20.2 and etcd on loopback ports: the cluster tests, benchmarks and demos use.

No kubelet, controller-manager or scheduler runs: nodes are plain objects (POST them with their
status) and bound pods stay Pending, which is all a scheduler needs.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import shutil
import signal
import socket
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import yaml

from kubesched_dev.devcluster.binaries import ensure_binaries, ensure_etcd
from kubesched_dev.devcluster.pki import Pki, make_pki
from kubesched_dev.devcluster.processes import ManagedProcess

SERVICE_CIDR = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"  # the first address of SERVICE_CIDR: the `kubernetes` Service
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
CONTEXT_NAME = "kubesched-dev"
BOOTSTRAPPED_PATHS = (
    *(f"/api/v1/namespaces/{ns}" for ns in ("default", "kube-system", "kube-public", "kube-node-lease")),
    "/api/v1/namespaces/default/services/kubernetes",
)
STATE_FILE = "state.json"
KUBECONFIG_FILE = "kubeconfig"


class ControlPlaneError(RuntimeError):
    """The control plane failed to start, or an operation needs a state it is not in."""


class LocalControlPlane:
    """etcd and kube-apiserver as child processes, with a CA, an admin token and a kubeconfig.

    Use as a context manager, or call `start()` and `stop()` (both synchronous: they run
    subprocesses and wait for readiness; from async code that is a pause of a few seconds).
    Everything lives in `work_dir`: a temporary directory (removed on stop) unless one is given.

        with LocalControlPlane() as cp:
            cp.kubeconfig, cp.server, cp.token, cp.ca_file
    """

    def __init__(
        self,
        work_dir: Path | str | None = None,
        *,
        bin_dir: Path | str | None = None,
        etcd_bin: Path | str | None = None,
        ready_timeout: float = 90.0,
        stop_grace: float = 10.0,
        extra_apiserver_args: Sequence[str] = (),
        stop_at_exit: bool = True,
    ) -> None:
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir).resolve() if work_dir is not None else None
        self._bin_dir = Path(bin_dir) if bin_dir is not None else None
        self._etcd_bin = Path(etcd_bin) if etcd_bin is not None else None
        self.ready_timeout = ready_timeout
        self.stop_grace = stop_grace
        self.extra_apiserver_args = tuple(extra_apiserver_args)
        self.stop_at_exit = stop_at_exit
        self.etcd_client_port = 0
        self.etcd_peer_port = 0
        self.apiserver_port = 0
        self.etcd: ManagedProcess | None = None
        self.apiserver: ManagedProcess | None = None
        self.startup_seconds: float | None = None
        self._pki: Pki | None = None

    # ----------------------------------------------------------------------------- where things are

    def _dir(self) -> Path:
        if self.work_dir is None:
            raise ControlPlaneError("the control plane has not been started")
        return self.work_dir

    @property
    def bin_dir(self) -> Path:
        """The directory holding kube-apiserver, kube-scheduler and kubectl 1.20.2."""
        if self._bin_dir is None:
            self._bin_dir = ensure_binaries()
        return self._bin_dir

    @property
    def server(self) -> str:
        """The API server's URL, e.g. https://127.0.0.1:34567."""
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_client_port}"

    @property
    def token(self) -> str:
        """A bearer token of a user in group system:masters."""
        return self._pki_files().admin_token

    @property
    def ca_file(self) -> Path:
        """The CA that signed the API server's serving certificate."""
        return self._pki_files().ca_cert

    @property
    def kubeconfig(self) -> Path:
        return self._dir() / KUBECONFIG_FILE

    @property
    def state_file(self) -> Path:
        return self._dir() / STATE_FILE

    @property
    def etcd_data_dir(self) -> Path:
        return self._dir() / "etcd-data"

    @property
    def etcd_log(self) -> Path:
        return self._dir() / "logs" / "etcd.log"

    @property
    def apiserver_log(self) -> Path:
        return self._dir() / "logs" / "kube-apiserver.log"

    def _pki_files(self) -> Pki:
        if self._pki is None:
            self._pki = Pki.at(self._dir() / "pki")
        return self._pki

    # ------------------------------------------------------------------------------ life cycle

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> Self:
        """Start etcd and kube-apiserver, wait until /readyz says ok, write the kubeconfig."""
        if self.is_running():
            return self
        if any(p is not None and p.alive() for p in (self.etcd, self.apiserver)):
            raise ControlPlaneError("half running: use start_apiserver(), or stop() first")
        bin_dir = self.bin_dir  # may build the binaries once: not part of the start-up time
        etcd_bin = self._etcd_bin or ensure_etcd()
        self._etcd_bin = etcd_bin
        began = time.monotonic()
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="kubesched-cp-"))
        work_dir = self.work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        self.etcd_client_port, self.etcd_peer_port, self.apiserver_port = _free_ports(3)
        self._pki = make_pki(work_dir / "pki", SERVICE_IP)
        if self.stop_at_exit:
            atexit.register(self._stop_at_exit)
        try:
            self._start_etcd(etcd_bin)
            self._start_apiserver(bin_dir)
            self._write_kubeconfig()
            self._write_state()
        except BaseException:
            self.stop(remove_data=False)  # keep the logs the error message points to
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self, *, remove_data: bool | None = None) -> None:
        """Stop kube-apiserver, then etcd (SIGTERM, SIGKILL after `stop_grace` s). Idempotent.

        `remove_data` (default: only for a temporary work dir of our own) deletes the etcd data,
        certificates, logs, kubeconfig and state file.
        """
        if self.stop_at_exit:
            atexit.unregister(self._stop_at_exit)
        if self.etcd is not None:
            self.etcd.send(signal.SIGCONT)  # a paused etcd would hold up the API server's shutdown
        self.stop_apiserver()
        if self.etcd is not None:
            self._terminate(self.etcd, "etcd")
            self.etcd = None
        if self.work_dir is None:
            return
        if remove_data if remove_data is not None else self._own_dir:
            self._remove_data()
        elif self.state_file.exists():
            self._write_state()

    def is_running(self) -> bool:
        """Whether both processes are alive (not whether the API server is ready: see `is_ready`)."""
        return all(p is not None and p.alive() for p in (self.etcd, self.apiserver))

    def is_ready(self, timeout: float = 2.0) -> bool:
        """Whether the API server answers ok on /readyz right now."""
        return self._probe("/readyz", "ok", timeout)[0]

    # ----------------------------------------------------------------------------- fault injection

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver only; etcd and its data stay."""
        if self.apiserver is not None:
            self._terminate(self.apiserver, "kube-apiserver")
            self.apiserver = None

    def start_apiserver(self) -> None:
        """Start kube-apiserver again on the same port with the same data, and wait until ready."""
        if self.etcd is None:
            raise ControlPlaneError("etcd is not running: call start()")
        if self.apiserver is not None and self.apiserver.alive():
            return
        self._start_apiserver(self.bin_dir)
        if self.state_file.exists():
            self._write_state()

    def restart_apiserver(self) -> None:
        """Stop and start kube-apiserver: watches break, data survives."""
        self.stop_apiserver()
        self.start_apiserver()

    def pause_etcd(self) -> None:
        """Freeze etcd (SIGSTOP): requests hang in the API server until `resume_etcd`."""
        self._require(self.etcd, "etcd").send(signal.SIGSTOP)

    def resume_etcd(self) -> None:
        self._require(self.etcd, "etcd").send(signal.SIGCONT)

    # ------------------------------------------------------------------------ persistent (make up/down)

    @classmethod
    def attach(cls, work_dir: Path | str, *, stop_at_exit: bool = False) -> LocalControlPlane:
        """Take over a control plane started (maybe by another process) in `work_dir`, from its state file."""
        work_dir = Path(work_dir).resolve()
        try:
            state: dict[str, Any] = json.loads((work_dir / STATE_FILE).read_text())
        except FileNotFoundError:
            raise ControlPlaneError(f"no control plane state in {work_dir}") from None
        cp = cls(work_dir, bin_dir=state["bin_dir"], etcd_bin=state["etcd_bin"], stop_at_exit=stop_at_exit)
        cp.etcd_client_port = state["ports"]["etcd_client"]
        cp.etcd_peer_port = state["ports"]["etcd_peer"]
        cp.apiserver_port = state["ports"]["apiserver"]
        cp.extra_apiserver_args = tuple(state.get("extra_apiserver_args", ()))
        # A pid recycled by an unrelated process since must not be signalled: check what runs there.
        pids = state["pids"]
        if pids.get("etcd") and (etcd := ManagedProcess("etcd", pids["etcd"], cp.etcd_log)).runs("etcd"):
            cp.etcd = etcd
        apiserver_pid = pids.get("kube-apiserver")
        if apiserver_pid:
            apiserver = ManagedProcess("kube-apiserver", apiserver_pid, cp.apiserver_log)
            if apiserver.runs("kube-apiserver"):
                cp.apiserver = apiserver
        if stop_at_exit:
            atexit.register(cp._stop_at_exit)
        return cp

    def state(self) -> dict[str, Any]:
        """What the state file holds: enough for `attach` to stop or restart the processes."""
        return {
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
            "ports": {
                "apiserver": self.apiserver_port,
                "etcd_client": self.etcd_client_port,
                "etcd_peer": self.etcd_peer_port,
            },
            "pids": {
                "etcd": self.etcd.pid if self.etcd else None,
                "kube-apiserver": self.apiserver.pid if self.apiserver else None,
            },
            "bin_dir": str(self.bin_dir),
            "etcd_bin": str(self._etcd_bin),
            "extra_apiserver_args": list(self.extra_apiserver_args),
            "logs": {"etcd": str(self.etcd_log), "kube-apiserver": str(self.apiserver_log)},
            "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }

    # --------------------------------------------------------------------------------- internals

    def _start_etcd(self, etcd_bin: Path) -> None:
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        argv = [
            str(etcd_bin),
            "--name=kubesched",
            f"--data-dir={self.etcd_data_dir}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=kubesched={peer}",
            "--initial-cluster-state=new",
            "--logger=zap",
            "--log-level=warn",
            # The default 2 GiB quota is within reach of long benchmark runs; no compaction runs
            # besides the API server's own every 5 minutes.
            "--quota-backend-bytes=8589934592",
        ]
        self.etcd = ManagedProcess.spawn("etcd", argv, self.etcd_log)
        deadline = time.monotonic() + 30.0
        while not _etcd_healthy(self.etcd_url):
            self._check_alive(self.etcd, "etcd")
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"etcd not healthy after 30 s; log tail:\n{self.etcd.log_tail()}")
            time.sleep(0.05)

    def apiserver_argv(self, bin_dir: Path) -> list[str]:
        """The kube-apiserver command line (public so a test can show what runs)."""
        pki = self._pki_files()
        return [
            str(bin_dir / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}",
            f"--cert-dir={pki.ca_cert.parent}",  # never /var/run/kubernetes
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--token-auth-file={pki.token_file}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={SA_ISSUER}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            # No controller-manager creates default ServiceAccounts, no kubelet lifts the not-ready taint.
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--endpoint-reconciler-type=none",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            # Generous: benchmarks drive thousands of binds per second from a single client.
            "--max-requests-inflight=2000",
            "--max-mutating-requests-inflight=1000",
            # DeleteCollection (tests clean up all nodes at once) is sequential per worker: 1,000 nodes
            # take about 3 s with the default single worker, about 1 s with 8.
            "--delete-collection-workers=8",
            "--profiling=false",
            *self.extra_apiserver_args,
        ]

    def _start_apiserver(self, bin_dir: Path) -> None:
        self.apiserver = ManagedProcess.spawn(
            "kube-apiserver", self.apiserver_argv(bin_dir), self.apiserver_log
        )
        self._wait_ready(self.apiserver)

    def _wait_ready(self, apiserver: ManagedProcess) -> None:
        deadline = time.monotonic() + self.ready_timeout
        # /readyz says ok before the bootstrap controller has created the system namespaces and the
        # `kubernetes` Service: a test creating something in `default` right away would get a 404.
        checks = [("/readyz", "ok"), *((path, None) for path in BOOTSTRAPPED_PATHS)]
        last = ""
        while checks:
            ok, last = self._probe(checks[0][0], checks[0][1], 2.0)
            if ok:
                checks.pop(0)
                continue
            self._check_alive(apiserver, "kube-apiserver")
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"kube-apiserver not ready after {self.ready_timeout:.0f} s ({checks[0][0]}: {last!r}); "
                    f"log {apiserver.log_file}, tail:\n{apiserver.log_tail()}"
                )
            time.sleep(0.1)

    def _probe(self, path: str, expect: str | None, timeout: float) -> tuple[bool, str]:
        """GET `path` as admin: ok if 200 (and the body is `expect`, when given)."""
        if not self.apiserver_port or not self.ca_file.exists():
            return False, "not started"
        request = urllib.request.Request(
            f"{self.server}{path}", headers={"Authorization": f"Bearer {self.token}"}
        )
        context = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
                body = response.read().decode(errors="replace")
                return response.status == 200 and (expect is None or body.strip() == expect), body[-500:]
        except urllib.error.HTTPError as e:
            return False, e.read().decode(errors="replace")[-500:]
        except (OSError, TimeoutError) as e:
            return False, str(e)

    def _check_alive(self, process: ManagedProcess, what: str) -> None:
        if not process.alive():
            raise ControlPlaneError(
                f"{what} exited with code {process.exit_code()}; log {process.log_file}, tail:\n"
                f"{process.log_tail()}"
            )

    def _terminate(self, process: ManagedProcess, executable: str) -> None:
        # An attached process (no Popen) is signalled only if its pid still runs the same binary.
        if process.popen is None and not process.runs(executable):
            return
        process.terminate(self.stop_grace)

    def _require(self, process: ManagedProcess | None, what: str) -> ManagedProcess:
        if process is None:
            raise ControlPlaneError(f"{what} is not running")
        return process

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": CONTEXT_NAME,
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": CONTEXT_NAME, "user": {"token": self.token}}],
            "contexts": [
                {
                    "name": CONTEXT_NAME,
                    "context": {"cluster": CONTEXT_NAME, "user": CONTEXT_NAME, "namespace": "default"},
                }
            ],
            "current-context": CONTEXT_NAME,
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)

    def _write_state(self) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state(), indent=2) + "\n")
        tmp.replace(self.state_file)

    def _remove_data(self) -> None:
        work_dir = self._dir()
        if self._own_dir:
            shutil.rmtree(work_dir, ignore_errors=True)
            return
        # A directory we were given may hold other things: remove only what we made.
        for name in ("etcd-data", "pki", "logs"):
            shutil.rmtree(work_dir / name, ignore_errors=True)
        for name in (KUBECONFIG_FILE, STATE_FILE):
            (work_dir / name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            work_dir.rmdir()  # only if now empty

    def _stop_at_exit(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to report to
            self.stop()


def _free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (all held open together while picking, so they differ)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _etcd_healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=1.0) as response:
            return bool(json.loads(response.read()).get("health") == "true")
    except (OSError, ValueError):
        return False
