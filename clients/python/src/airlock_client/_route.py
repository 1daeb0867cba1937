"""Reaching the server that holds a sandbox, when several serve behind one name.

`airlock serve --node-name NAME` (in Kubernetes: the StatefulSet pod's name) puts NAME in every
sandbox id it hands out (`sb-NAME.<rest>`). Create a sandbox through any server (the
load-balanced Service); afterwards reach it at the server its id names (docs/deploy.md).
"""
from typing import Optional


def sandbox_node(sandbox_id: str) -> Optional[str]:
    """The server name carried by `sandbox_id`, or None for a server started without one."""
    if not sandbox_id.startswith("sb-"):
        return None
    node, dot, _ = sandbox_id[3:].partition(".")
    return node if dot and node else None


def sandbox_url(sandbox_id: str, template: str) -> str:
    """`template` with `{node}` replaced by the server that holds `sandbox_id`, e.g.
    `sandbox_url(sid, "ws://{node}.airlock.airlock.svc.cluster.local:7878/")`.
    Raises ValueError when the id names no server."""
    node = sandbox_node(sandbox_id)
    if node is None:
        raise ValueError(f"sandbox id {sandbox_id!r} names no server (serve has no --node-name)")
    return template.format(node=node)
