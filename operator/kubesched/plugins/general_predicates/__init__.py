"""GeneralPredicates: no plugin of its own. 1.20's legacy registry maps the name to four filters
of four plugins (NodeResourcesFit, NodeName, NodePorts, NodeAffinity); it is declared here, apart
from them, so that none of their folders imports the others.

Predicate GeneralPredicates: PodFitsResources, HostName, PodFitsHostPorts and MatchNodeSelector.
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, register
from kubesched.plugins.node_affinity import MatchNodeSelector
from kubesched.plugins.node_name import HostName
from kubesched.plugins.node_ports import PodFitsHostPorts
from kubesched.plugins.node_resources import PodFitsResources

register(
    predicate(
        PodFitsResources,
        HostName,
        PodFitsHostPorts,
        MatchNodeSelector,
        name="GeneralPredicates",
        order=2,
        default=True,
        summary="`PodFitsResources`, `HostName`, `PodFitsHostPorts` and `MatchNodeSelector` together.",
    ),
)
