"""`python -m kubesched_dev.devcluster up|down|status|demo`: a control plane that outlives the command.

`up` prints `export KUBECONFIG=...` on stdout (everything else goes to stderr), so
`eval "$(python -m kubesched_dev.devcluster up)"` works.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

from kubesched_dev.devcluster.binaries import BinariesError, repo_root
from kubesched_dev.devcluster.controlplane import STATE_FILE, ControlPlaneError, LocalControlPlane

DIR_ENV = "KUBESCHED_CLUSTER_DIR"


def default_dir() -> Path:
    """`.cluster/` in the repository root (or the current directory outside a checkout)."""
    explicit = os.environ.get(DIR_ENV)
    if explicit:
        return Path(explicit)
    return (repo_root() or Path.cwd()) / ".cluster"


def _info(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _print_env(cp: LocalControlPlane) -> None:
    print(f"# kubeconfig: {cp.kubeconfig}")
    print(f"export KUBECONFIG={cp.kubeconfig}")


def cmd_up(args: argparse.Namespace) -> int:
    work_dir: Path = args.dir.resolve()
    if (work_dir / STATE_FILE).exists():
        cp = LocalControlPlane.attach(work_dir)
        if cp.is_running() and cp.is_ready():
            _info(f"already up: {cp.server} (dir {work_dir})")
            _print_env(cp)
            return 0
        _info("found a control plane that is not ready: stopping it and starting afresh")
        cp.stop(remove_data=True)
    cp = LocalControlPlane(work_dir, ready_timeout=args.timeout, stop_at_exit=False)
    # Leftovers of a start that failed (its logs were shown then): etcd data of another member.
    cp.stop(remove_data=True)
    _info(f"starting etcd and kube-apiserver in {work_dir} ...")
    cp.start()
    _info(f"kube-apiserver ready at {cp.server} in {cp.startup_seconds:.1f} s")
    _info(f"logs: {cp.apiserver_log} {cp.etcd_log}")
    _print_env(cp)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    work_dir: Path = args.dir.resolve()
    if not (work_dir / STATE_FILE).exists():
        _info(f"no control plane in {work_dir}")
        return 0
    cp = LocalControlPlane.attach(work_dir)
    began = time.monotonic()
    cp.stop(remove_data=True)
    _info(f"stopped in {time.monotonic() - began:.1f} s; data removed")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    work_dir: Path = args.dir.resolve()
    if not (work_dir / STATE_FILE).exists():
        print(f"down (no state in {work_dir})")
        return 1
    cp = LocalControlPlane.attach(work_dir)
    etcd = f"pid {cp.etcd.pid}" if cp.etcd else "not running"
    apiserver = f"pid {cp.apiserver.pid}" if cp.apiserver else "not running"
    ready = cp.is_running() and cp.is_ready()
    print(f"{'up' if ready else 'not ready'}: {cp.server}")
    print(f"  etcd           {etcd} ({cp.etcd_url})")
    print(f"  kube-apiserver {apiserver}")
    print(f"  kubeconfig     {cp.kubeconfig}")
    print(f"  logs           {cp.apiserver_log} {cp.etcd_log}")
    return 0 if ready else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from kubesched_dev.devcluster.demo import NAMESPACE, create_demo

    kubeconfig: Path | None = args.kubeconfig
    if kubeconfig is None:
        env = os.environ.get("KUBECONFIG")
        kubeconfig = Path(env) if env else default_dir() / "kubeconfig"
    result = asyncio.run(create_demo(kubeconfig, args.nodes, args.pods, args.scheduler_name))
    print(
        f"demo: {result.nodes_created} of {args.nodes} nodes and {result.pods_created} of {args.pods} pods "
        f"created (namespace {NAMESPACE}, schedulerName {args.scheduler_name}; existing ones kept)"
    )
    if result.crds:
        print(f"demo: CRDs installed: {', '.join(result.crds)}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m kubesched_dev.devcluster", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)

    def with_dir(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--dir", type=Path, default=default_dir(), help="state, certs, data and logs")
        return p

    up = with_dir(sub.add_parser("up", help="start etcd + kube-apiserver detached (no-op if up)"))
    up.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for /readyz")
    up.set_defaults(func=cmd_up)
    with_dir(sub.add_parser("down", help="stop them and remove the data")).set_defaults(func=cmd_down)
    with_dir(sub.add_parser("status", help="exit 0 if up and ready")).set_defaults(func=cmd_status)

    demo = sub.add_parser("demo", help="create demo nodes, pods and a Service (skips existing)")
    demo.add_argument("--kubeconfig", type=Path, default=None, help="default: $KUBECONFIG, else the up dir's")
    demo.add_argument("--nodes", type=int, default=6)
    demo.add_argument("--pods", type=int, default=20)
    demo.add_argument("--scheduler-name", default="kubesched")
    demo.set_defaults(func=cmd_demo)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except (ControlPlaneError, BinariesError) as e:
        _info(f"error: {e}")
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
