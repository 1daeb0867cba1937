"""The node actors of a batch: one per alive Ray node, pinned there, started together."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from airlock_client import ToolFn

from ._node import NodeServer
from ._types import Limits


@dataclass
class Node:
    """A node actor the driver can still send work to."""

    node_id: str
    actor: Any
    slots: int
    in_flight: int = 0


def alive_nodes() -> List[Dict[str, Any]]:
    """Ray's alive nodes that have CPUs."""
    nodes: List[Dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    return [n for n in nodes if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]


def start_nodes(*, slots_per_node: Optional[int], limits: Limits, tools: Optional[Mapping[str, ToolFn]],
                binary: Optional[str], server_args: Sequence[str]) -> List[Node]:
    """One started `NodeServer` actor per alive node. A node whose server does not start is left
    out (said in the error if none starts)."""
    remote: Any = ray.remote(NodeServer)
    pending = []
    for info in alive_nodes():
        node_id = info["NodeID"]
        slots = slots_per_node or max(1, int(info["Resources"]["CPU"]))
        actor = remote.options(
            num_cpus=0, max_concurrency=slots + 2, max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(slots, limits, tools, binary, server_args)
        start: Any = actor.start
        pending.append((Node(node_id, actor, slots), start.remote(node_id)))
    nodes, failures = [], []
    for node, ref in pending:
        try:
            ray.get(ref)
            nodes.append(node)
        except Exception as e:  # noqa: BLE001 - a node that cannot start is skipped, and said
            failures.append(f"{node.node_id[:12]}: {e}")
            ray.kill(node.actor)
    if not nodes:
        raise RuntimeError("no Ray node could start an airlock server: " + "; ".join(failures or ["no alive node"]))
    return nodes


def stop_nodes(nodes: List[Node]) -> None:
    """Stop every node's server (disposing its sandboxes), then its actor."""
    refs = [n.actor.stop.remote() for n in nodes]
    try:
        ray.get(refs, timeout=30)
    except Exception:  # noqa: BLE001 - a lost node has nothing to stop
        pass
    for n in nodes:
        ray.kill(n.actor)
