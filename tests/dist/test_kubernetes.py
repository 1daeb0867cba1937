"""The Kubernetes manifests, checked offline: every object against the Kubernetes schemas
(kubernetes-validate, strict: an unknown field fails), the agent-sandbox objects' pod template
as a core PodTemplate and their own fields against the v1beta1 CRDs' field names, and the
security context against what the container test proved airlock needs (test_image.py)."""
import copy
import json
import pathlib
import subprocess

import kubernetes_validate
import pytest
import yaml

from conftest import REPO

MANIFESTS = REPO / "deploy" / "kubernetes"
# The oldest release with user-namespaced pods on by default, and the newest bundled.
VERSIONS = ["1.33.0", kubernetes_validate.latest_version()]
AGENT_SANDBOX = "extensions.agents.x-k8s.io/v1beta1"
# The spec fields each agent-sandbox kind has in its v1beta1 CRD (kubernetes-sigs/agent-sandbox),
# and the ones it requires.
AGENT_SANDBOX_SPEC = {
    "SandboxTemplate": ({"podTemplate", "networkPolicy", "networkPolicyManagement", "service",
                         "volumeClaimTemplates", "volumeClaimTemplatesPolicy", "envVarsInjectionPolicy"},
                        {"podTemplate"}),
    "SandboxWarmPool": ({"replicas", "sandboxTemplateRef", "updateStrategy"}, {"sandboxTemplateRef"}),
    "SandboxClaim": ({"warmPoolRef", "lifecycle", "env", "additionalPodMetadata", "volumeClaimTemplates"},
                     {"warmPoolRef"}),
}


def documents():
    for path in sorted(MANIFESTS.rglob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path.relative_to(MANIFESTS), doc


def validate(doc: dict) -> None:
    for version in VERSIONS:
        kubernetes_validate.validate(doc, version, strict=True)


def pod_specs():
    """(where, pod spec) of every pod the manifests make."""
    for where, doc in documents():
        if doc["kind"] in ("StatefulSet", "DaemonSet"):
            yield where, doc["spec"]["template"]["spec"]
        elif doc["kind"] == "SandboxTemplate":
            yield where, doc["spec"]["podTemplate"]["spec"]


def test_every_manifest_is_valid_against_the_kubernetes_schemas() -> None:
    seen = set()
    for where, doc in documents():
        seen.add(doc["kind"])
        if doc["apiVersion"] == AGENT_SANDBOX:
            fields, required = AGENT_SANDBOX_SPEC[doc["kind"]]
            assert set(doc["spec"]) <= fields and required <= set(doc["spec"]), where
            if doc["kind"] == "SandboxTemplate":
                validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                          "template": doc["spec"]["podTemplate"]})
            continue
        try:
            validate(doc)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{where}: {e}")
    assert {"StatefulSet", "Service", "NetworkPolicy", "PodDisruptionBudget", "SandboxTemplate",
            "SandboxClaim"} <= seen, seen


def test_the_validation_catches_a_misspelt_field() -> None:
    doc = next(d for _, d in documents() if d["kind"] == "StatefulSet")
    bad = copy.deepcopy(doc)
    bad["spec"]["template"]["spec"]["containers"][0]["securityContext"]["procMnt"] = "Unmasked"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSIONS[0], strict=True)


def test_the_kustomization_lists_every_file() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    top = {p.name for p in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == top


def test_airlock_pods_have_exactly_the_security_context_the_image_test_proved() -> None:
    """The settings of test_image.MINIMAL in Kubernetes terms: a user namespace (the
    procMount requires it), an unmasked /proc, the Localhost seccomp profile; a non-root user,
    no capabilities, no escalation, a read-only root."""
    containerfile = (REPO / "deploy" / "Containerfile").read_text()
    uid = int(next(l for l in containerfile.splitlines() if l.startswith("ARG UID=")).split("=")[1])
    checked = 0
    for where, pod in pod_specs():
        if where.name == "seccomp-profile.yaml":
            continue
        checked += 1
        assert pod["hostUsers"] is False, where
        assert pod["automountServiceAccountToken"] is False, where
        psc = pod["securityContext"]
        assert psc["runAsNonRoot"] is True and psc["runAsUser"] == uid, where
        assert psc["seccompProfile"] == {"type": "Localhost", "localhostProfile": "profiles/airlock.json"}
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                          "procMount": "Unmasked", "capabilities": {"drop": ["ALL"]}}, where
            assert "memory" in c["resources"]["limits"], where
    assert checked == 2


def test_the_seccomp_profile_is_podmans_default_plus_sethostname() -> None:
    default = pathlib.Path("/usr/share/containers/seccomp.json")
    if not default.exists():
        pytest.fail("no /usr/share/containers/seccomp.json: apt-get install golang-github-containers-common")
    made = subprocess.run(["python3", str(REPO / "scripts" / "seccomp-profile.py"), str(default), "/dev/stdout"],
                          capture_output=True, text=True, check=True).stdout
    shipped = (REPO / "deploy" / "seccomp" / "airlock.json").read_text()
    assert json.loads(made) == json.loads(shipped), "run python3 scripts/seccomp-profile.py"
    profile = json.loads(shipped)
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    unconditional = [r for r in profile["syscalls"] if "sethostname" in r["names"]]
    assert unconditional == [{"names": ["sethostname"], "action": "SCMP_ACT_ALLOW",
                              "comment": unconditional[0]["comment"]}]


def statefulset() -> dict:
    return next(d for _, d in documents() if d["kind"] == "StatefulSet")


def flag(args: list, name: str) -> str:
    """The value of `--name=value` in `args` (the manifests spell every flag that way)."""
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    assert len(values) == 1, (name, args)
    return values[0]


def test_termination_outlasts_the_drain_and_its_pauses() -> None:
    """SIGTERM drains (docs/server.md "Shutdown: the drain"): the grace, then the connections'
    end, then the pauses, all before the kubelet's SIGKILL; no preStop hook eats into it."""
    pod = statefulset()["spec"]["template"]["spec"]
    server = pod["containers"][0]
    grace = float(flag(server["args"], "drain-grace"))
    shutdown = float(flag(server["args"], "shutdown-timeout"))
    pause_budget = 60
    assert pod["terminationGracePeriodSeconds"] >= grace + shutdown + pause_budget, pod
    assert "lifecycle" not in server, "no preStop: it would only delay the drain"


def test_probes_are_readyz_and_healthz_on_the_main_port() -> None:
    server = statefulset()["spec"]["template"]["spec"]["containers"][0]
    port = server["ports"][0]["name"]
    assert server["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}
    assert server["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}
    assert "scheme" not in server["readinessProbe"]["httpGet"]  # plain HTTP, unauthenticated


def test_the_state_dir_is_a_subdirectory_of_a_per_pod_claim() -> None:
    """--state-dir on the pod's own PersistentVolumeClaim (kept when the pod goes), a
    subdirectory of the mount (the store must be closed to group and others, a volume root
    under fsGroup is not), fsGroup the server's group with OnRootMismatch (no re-chmod of the
    store's files), and room for the store's 16 GiB plus the 1 GiB it keeps free."""
    sts = statefulset()
    pod = sts["spec"]["template"]["spec"]
    server = pod["containers"][0]
    state = pathlib.PurePosixPath(flag(server["args"], "state-dir"))
    claims = {c["metadata"]["name"]: c for c in sts["spec"]["volumeClaimTemplates"]}
    mounts = [m for m in server["volumeMounts"] if m["name"] in claims]
    assert len(mounts) == 1, server["volumeMounts"]
    mount = pathlib.PurePosixPath(mounts[0]["mountPath"])
    assert state.parent == mount and state != mount, (state, mount)
    assert not mounts[0].get("readOnly", False)
    assert mounts[0]["name"] not in {v["name"] for v in pod["volumes"]}, "a claim, not a pod volume"
    claim = claims[mounts[0]["name"]]["spec"]
    assert claim["accessModes"] == ["ReadWriteOnce"]
    size = claim["resources"]["requests"]["storage"]
    assert size.endswith("Gi") and int(size[:-2]) >= 16 + 1, size
    psc = pod["securityContext"]
    assert psc["fsGroup"] == psc["runAsGroup"] and psc["fsGroupChangePolicy"] == "OnRootMismatch"
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain",
                                                                    "whenScaled": "Retain"}
