"""Find (or build once) the binaries a local control plane needs: kube-apiserver 1.20.2 and etcd."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

K8S_VERSION = "1.20.2"
BIN_DIR_ENV = "KUBESCHED_K8S_BIN"
ETCD_ENV = "KUBESCHED_ETCD"
BUILD_SCRIPT = Path("hack") / "build-kubernetes.sh"


class BinariesError(RuntimeError):
    """The binaries cannot be found or built."""


def repo_root() -> Path | None:
    """The checkout this package lives in (hack/kubesched_dev/devcluster/ inside it), if it is one."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / BUILD_SCRIPT).is_file() else None


def cache_dir() -> Path:
    """Where hack/build-kubernetes.sh caches its output (same rule as the script)."""
    explicit = os.environ.get("KUBESCHED_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kubesched"


def ensure_binaries() -> Path:
    """Return the directory holding kube-apiserver (and kube-scheduler, kubectl), building it if needed.

    `KUBESCHED_K8S_BIN` names a ready directory and skips the build. Otherwise
    hack/build-kubernetes.sh runs: instant when its cache is warm, about 8 minutes on a fresh machine.
    Also makes sure etcd is installed.
    """
    explicit = os.environ.get(BIN_DIR_ENV)
    if explicit:
        bin_dir = Path(explicit).expanduser().resolve()
        if not (bin_dir / "kube-apiserver").is_file():
            raise BinariesError(f"{BIN_DIR_ENV}={explicit} holds no kube-apiserver")
    else:
        bin_dir = _run_build_script()
    ensure_etcd()
    return bin_dir


def _run_build_script() -> Path:
    root = repo_root()
    if root is None:
        raise BinariesError(
            f"{BUILD_SCRIPT} not found next to this package; set {BIN_DIR_ENV} to a directory "
            f"holding kube-apiserver {K8S_VERSION}"
        )
    lock_dir = cache_dir()
    lock_dir.mkdir(parents=True, exist_ok=True)
    # Two test sessions starting on a fresh machine must not both spend 8 minutes building.
    with open(lock_dir / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # The script logs to stderr (passed through: the build is long and should show progress)
        # and prints only the bin directory on stdout.
        result = subprocess.run(
            ["bash", str(root / BUILD_SCRIPT)],
            stdout=subprocess.PIPE,
            stderr=None,
            text=True,
            check=False,
        )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise BinariesError(f"{BUILD_SCRIPT} failed with exit code {result.returncode}")
    return Path(lines[-1])


def ensure_etcd() -> Path:
    """Return the etcd binary (`KUBESCHED_ETCD`, else etcd on PATH), apt-installing etcd-server if absent."""
    explicit = os.environ.get(ETCD_ENV)
    if explicit:
        return Path(explicit)
    found = shutil.which("etcd") or _apt_install_etcd()
    return Path(found)


def _apt_install_etcd() -> str:
    if shutil.which("apt-get") is None:
        raise BinariesError(f"etcd is not installed and there is no apt-get; set {ETCD_ENV}")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "etcd-server"]):
        subprocess.run([*sudo, *cmd], stdout=2, env=env, check=True)  # apt's chatter to stderr
    found = shutil.which("etcd")
    if found is None:
        raise BinariesError("apt-get installed etcd-server but etcd is still not on PATH")
    return found
