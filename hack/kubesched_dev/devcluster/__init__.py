"""A local real control plane (etcd + kube-apiserver 1.20.2) for tests, benchmarks and demos.

Run `python -m kubesched_dev.devcluster --help` for the persistent mode behind `make cluster-up`.
"""

from kubesched_dev.devcluster.binaries import BinariesError, ensure_binaries, ensure_etcd
from kubesched_dev.devcluster.controlplane import ControlPlaneError, LocalControlPlane

__all__ = ["BinariesError", "ControlPlaneError", "LocalControlPlane", "ensure_binaries", "ensure_etcd"]
