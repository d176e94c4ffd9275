"""PodFitsHostPorts, alias PodFitsPorts (plugin NodePorts): host port conflicts.

HostPortInfo.CheckConflict: a wanted 0.0.0.0 port conflicts with the same protocol/port on any IP;
a wanted specific IP conflicts with that IP and with 0.0.0.0. The model already turned an empty
hostIP into 0.0.0.0 and an empty protocol into TCP, as HostPortInfo.sanitize does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import HostPort, Pod
from kubesched.plugins.framework import FITS, SKIP, Predicate

ERR_REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
BIND_ALL_HOST_IP = "0.0.0.0"


def port_conflicts(wanted: HostPort, used: Sequence[HostPort]) -> bool:
    for port in used:
        if port.port != wanted.port or port.protocol != wanted.protocol:
            continue
        if wanted.ip == BIND_ALL_HOST_IP or port.ip in (BIND_ALL_HOST_IP, wanted.ip):
            return True
    return False


class PodFitsHostPorts(Predicate):
    name = "PodFitsHostPorts"

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        return pod.host_ports or SKIP

    def filter(self, pod: Pod, state: Any, node: NodeInfo) -> Sequence[str]:
        used = node.used_ports
        if used and any(port_conflicts(wanted, used) for wanted in state):
            return (ERR_REASON_PORTS,)
        return FITS
