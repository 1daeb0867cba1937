"""Writes deploy/seccomp/airlock.json: podman's default seccomp profile (containers-common's
/usr/share/containers/seccomp.json) with `sethostname` moved to an unconditional allow, the one
call airlock needs that the default denies to a container without CAP_SYS_ADMIN (each run names
its own uts namespace). docs/deploy.md says why; the container test runs with it.

Usage: python3 scripts/seccomp-profile.py [DEFAULT_PROFILE] [OUT]
"""
import json
import sys

DEFAULT = "/usr/share/containers/seccomp.json"  # apt-get install golang-github-containers-common
OUT = "deploy/seccomp/airlock.json"


def airlock_profile(default: dict) -> dict:
    for rule in default["syscalls"]:
        rule["names"] = [n for n in rule["names"] if n != "sethostname"]
    default["syscalls"] = [r for r in default["syscalls"] if r["names"]]
    default["syscalls"].append({
        "names": ["sethostname"],
        "action": "SCMP_ACT_ALLOW",
        "comment": "airlock names each run's own uts namespace (docs/deploy.md)",
    })
    return default


def main() -> None:
    src = sys.argv[1] if len(sys.argv) > 1 else DEFAULT
    out = sys.argv[2] if len(sys.argv) > 2 else OUT
    with open(src) as f:
        profile = airlock_profile(json.load(f))
    with open(out, "w") as f:
        json.dump(profile, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
