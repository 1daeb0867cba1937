"""airlock as a maf-sandbox backend (docs/maf.md).

```python
from maf_sandbox import SandboxRouter
from airlock_maf import AirlockSandboxBackend

backend = AirlockSandboxBackend()                      # launches `airlock serve --stdio`
router = SandboxRouter([backend], min_isolation=backend.isolation)
```

`AirlockSandboxBackend.connect(url, token)` drives a running `airlock serve --listen` instead.
"""
from .backend import AirlockSandboxBackend, policy_limits
from .channel import AirlockProgramChannel
from .sandbox import AirlockResetError, AirlockSandbox

__all__ = ["AirlockProgramChannel", "AirlockResetError", "AirlockSandbox", "AirlockSandboxBackend", "policy_limits"]
