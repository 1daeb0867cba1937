"""Where the `airlock` binary is: what `StdioClient.start()` spawns when given none."""
import os
import shutil
import sys
import sysconfig
from typing import Optional


def _installed_beside_python() -> Optional[str]:
    """The `airlock` the `airlock` wheel installed for this interpreter (its scripts dir, or the
    user scheme's), which need not be on PATH (a venv that is not activated)."""
    schemes = [sysconfig.get_default_scheme()] if hasattr(sysconfig, "get_default_scheme") else []
    schemes.append(f"{os.name}_user")
    for scheme in schemes:
        try:
            scripts = sysconfig.get_path("scripts", scheme)
        except KeyError:
            continue
        candidate = os.path.join(scripts, "airlock")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    # A venv's interpreter is a link into it: its directory holds the scripts too.
    candidate = os.path.join(os.path.dirname(sys.executable), "airlock")
    if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
        return candidate
    return None


def find_airlock_bin() -> str:
    """`$AIRLOCK_BIN`; else the binary installed with this package (`pip install airlock`);
    else `airlock` on PATH. Never raises: a missing binary fails when it is spawned."""
    env = os.environ.get("AIRLOCK_BIN")
    if env:
        return env
    return _installed_beside_python() or shutil.which("airlock") or "airlock"
