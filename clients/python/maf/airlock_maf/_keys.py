"""A maf-sandbox identity — `(scope, thread_id, agent_id, call_id)` and the spec's `kind` — as
the airlock key that names one sandbox on the broker.

airlock keys a sandbox by `(scope, thread_id, call_id)`, and `scope.dispose` sweeps a
`(scope, thread_id)`. So scope and thread keep their meaning (a conversation purge reaches every
sandbox of the conversation, whoever made it), and the other three legs are folded into the
call id: every sandbox is created call-scoped on the broker, so two kinds, two agents or two
calls never resolve to one sandbox. The fold is deterministic, which is what lets a second
process (or this one after a restart) find the same sandbox by key.
"""
from __future__ import annotations

import hashlib
import json

from airlock_client import SandboxKey as WireKey
from maf_sandbox import SandboxKey

#: airlock's limit on one key part, in bytes.
MAX_PART = 128
#: The scope airlock reserves for keyless sandboxes.
RESERVED_SCOPE = "airlock-keyless"


def _digest(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()[:48]


def wire_part(value: str) -> str:
    """`value` itself when airlock accepts it verbatim, otherwise a digest of it.

    A verbatim part never starts with `~` and a digest always does, so the two cannot meet.
    """
    verbatim = (
        0 < len(value.encode("utf-8")) <= MAX_PART
        and value.isprintable()
        and not value.startswith("~")
        and value != RESERVED_SCOPE
    )
    return value if verbatim else "~" + _digest(value)


def conversation(scope: str, thread_id: str) -> tuple[str, str]:
    """The airlock `(scope, thread_id)` of a maf conversation."""
    return wire_part(scope), wire_part(thread_id)


def wire_key(key: SandboxKey, kind: str) -> WireKey:
    """The airlock key of one maf sandbox: its conversation, and the rest folded into the call."""
    scope, thread = conversation(key.scope, key.thread_id)
    return WireKey(scope=scope, thread_id=thread, call_id="maf-" + _digest(key.agent_id, kind, key.call_id))
