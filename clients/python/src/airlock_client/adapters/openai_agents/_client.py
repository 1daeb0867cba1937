"""`AirlockSandboxClient`: the Agents SDK's `BaseSandboxClient` making airlock sandboxes."""
from __future__ import annotations

import uuid
from typing import Optional, Union

from agents.sandbox.manifest import Manifest
from agents.sandbox.session.dependencies import Dependencies
from agents.sandbox.session.manager import Instrumentation
from agents.sandbox.session.sandbox_client import BaseSandboxClient
from agents.sandbox.session.sandbox_session import SandboxSession
from agents.sandbox.session.sandbox_session_state import SandboxSessionState
from agents.sandbox.snapshot import SnapshotBase, SnapshotSpec, resolve_snapshot

from ...client import BaseClient
from ...errors import NotFoundError
from ._options import WORK_DIR, AirlockSandboxClientOptions, AirlockSandboxSessionState
from ._session import AirlockSandboxSession

_DEFAULT_ROOT = Manifest.model_fields["root"].default


def workspace_manifest(manifest: Optional[Manifest]) -> Manifest:
    """The manifest rooted at the sandbox's /work: the SDK's default root (/workspace) is moved
    there; any other root is refused, since an airlock sandbox's files live beneath /work."""
    if manifest is None:
        return Manifest(root=WORK_DIR)
    if manifest.root == WORK_DIR:
        return manifest
    if manifest.root == _DEFAULT_ROOT:
        return manifest.model_copy(update={"root": WORK_DIR})
    raise ValueError(f"an airlock sandbox's workspace is {WORK_DIR}; Manifest(root={manifest.root!r}) cannot be used")


class AirlockSandboxClient(BaseSandboxClient[Optional[AirlockSandboxClientOptions]]):
    """Makes, re-attaches and deletes airlock sandboxes for `SandboxAgent` runs.

    `client` is a connected `AsyncClient` or `StdioClient`, used from the event loop that made
    it (the loop `Runner.run` runs on).
    """

    backend_id = "airlock"
    supports_default_options = True

    def __init__(self, client: BaseClient, *, instrumentation: Optional[Instrumentation] = None,
                 dependencies: Optional[Dependencies] = None) -> None:
        self._client = client
        self._instrumentation = instrumentation if instrumentation is not None else Instrumentation()
        self._dependencies = dependencies

    async def create(self, *, snapshot: Union[SnapshotSpec, SnapshotBase, None] = None,
                     manifest: Optional[Manifest] = None,
                     options: Optional[AirlockSandboxClientOptions] = None) -> SandboxSession:
        """A session over a new airlock sandbox (`sandbox.create` with `options`)."""
        options = options if options is not None else AirlockSandboxClientOptions()
        manifest = self._validate_manifest_for_create(workspace_manifest(manifest))
        sandbox = await self._client.sandbox(**options.sandbox_kwargs())
        session_id = uuid.uuid4()
        state = AirlockSandboxSessionState(session_id=session_id, manifest=manifest, sandbox_id=sandbox.sandbox_id,
                                           snapshot=resolve_snapshot(snapshot, str(session_id)), options=options)
        return self._wrap_session(AirlockSandboxSession(state=state, sandbox=sandbox),
                                  instrumentation=self._instrumentation)

    async def delete(self, session: SandboxSession) -> SandboxSession:
        """Dispose of the session's airlock sandbox, unless its options keep it
        (`dispose_on_shutdown=False`)."""
        inner = session._inner
        if not isinstance(inner, AirlockSandboxSession):
            raise TypeError("AirlockSandboxClient.delete expects a session it made")
        if inner.state.options.dispose_on_shutdown:
            await inner.dispose()
        return session

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        """Re-attach to the state's airlock sandbox if it still lives (its files are all there);
        otherwise make a new one, which `start()` hydrates from the state's snapshot."""
        if not isinstance(state, AirlockSandboxSessionState):
            raise TypeError("AirlockSandboxClient.resume expects an AirlockSandboxSessionState")
        state.assert_path_grants_rebound()
        try:
            sandbox = await self._client.connect_sandbox(state.sandbox_id)
            reattached = True
        except NotFoundError:
            sandbox = await self._client.sandbox(**state.options.sandbox_kwargs())
            state.sandbox_id, state.workspace_root_ready = sandbox.sandbox_id, False
            reattached = False
        inner = AirlockSandboxSession(state=state, sandbox=sandbox)
        inner._set_start_state_preserved(reattached, system=reattached)
        return self._wrap_session(inner, instrumentation=self._instrumentation)

    def deserialize_session_state(self, payload: dict[str, object]) -> SandboxSessionState:
        return self._deserialize_session_state_payload(payload, AirlockSandboxSessionState)
