"""The OpenAI Agents SDK on airlock (`pip install 'airlock-ai[openai-agents]'`).

`AirlockSandboxClient` is a sandbox client of the SDK (`agents.sandbox`): give it to
`SandboxRunConfig(client=...)`, or make a session with it and pass
`SandboxRunConfig(session=...)`, and a `SandboxAgent`'s shell (`exec_command`), `view_image`,
`apply_patch` and manifest files run in an airlock sandbox. Workspace persist/hydrate (the
SDK's snapshots) use tar archives made inside the sandbox; `resume` re-attaches to a sandbox
that still lives. Reference: docs/sdk.md, "Adapters".
"""
try:
    import agents.sandbox  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError("airlock_client.adapters.openai_agents needs the OpenAI Agents SDK: "
                      "pip install 'airlock-ai[openai-agents]'") from e

from ._client import AirlockSandboxClient, workspace_manifest
from ._options import WORK_DIR, AirlockSandboxClientOptions, AirlockSandboxSessionState
from ._session import AirlockSandboxSession, exec_result

__all__ = ["AirlockSandboxClient", "AirlockSandboxClientOptions", "AirlockSandboxSession",
           "AirlockSandboxSessionState", "WORK_DIR", "exec_result", "workspace_manifest"]
