"""Names a user can install: one PyPI distribution (`airlock-ai`, checked free on PyPI on
2026-12-04; docs/deploy.md, "Names") carries the binary, the SDK, the maf-sandbox backend and
every extra, from the wheel and from the repository alike; every `pip install` line in README.md
and docs/*.md names it (or a third-party package, never another airlock-* name) and resolves
OFFLINE against the built wheel and a local wheelhouse; no workspace crate can be published."""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from typing import Dict, List, Optional, Tuple

import pytest

from conftest import REPO
from install_lines import InstallLine, install_lines

NAME = "airlock-ai"
EXTRAS = ["langchain", "openai-agents", "smolagents", "maf", "ray"]
PYPROJECT = REPO / "clients" / "python" / "pyproject.toml"
CACHE = pathlib.Path(os.environ.get("AIRLOCK_TEST_CACHE", "/var/cache/airlock-test"))
# Third-party packages the docs install (benchmark peers and their references). Anything else,
# and above all another airlock-* name, is a name nobody here controls.
THIRD_PARTY = {"pydantic-monty", "smolagents", "jupyter-client", "ipykernel"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(arg: str) -> str:
    return canonical(re.split(r"[\[<>=~!;\s]", arg, maxsplit=1)[0])


def extras_of(arg: str) -> List[str]:
    m = re.search(r"\[([^\]]*)\]", arg)
    return [canonical(e.strip()) for e in m.group(1).split(",")] if m else []


def is_path(arg: str) -> bool:
    return "/" in arg or arg.startswith(".")


def pyproject() -> dict:
    return dict(tomllib.loads(PYPROJECT.read_text())["project"])


def wheel_metadata(wheel: pathlib.Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode()


def test_the_wheel_and_the_repository_carry_one_name_with_every_extra(wheel: pathlib.Path) -> None:
    meta = wheel_metadata(wheel)
    fields = [line.split(": ", 1) for line in meta.split("\n\n", 1)[0].splitlines()]
    assert ["Name", NAME] in fields, meta
    assert pyproject()["name"] == NAME
    assert [v for k, v in fields if k == "Provides-Extra"] == EXTRAS, meta
    requires = [v for k, v in fields if k == "Requires-Dist"]
    assert "websockets>=13" in requires, requires
    assert 'langchain-core>=1.0; extra == "langchain"' in requires, requires
    assert 'openai-agents>=0.24; extra == "openai-agents"' in requires, requires
    assert 'smolagents>=1.20; extra == "smolagents"' in requires, requires
    assert 'maf-sandbox~=0.51.1; (python_version >= "3.12") and extra == "maf"' in requires, requires
    assert 'ray>=2.40; extra == "ray"' in requires, requires
    # Every extra's packages are in the wheel: the adapters, the maf-sandbox backend, airlock_ray.
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for module in ("airlock_client/adapters/langchain.py", "airlock_client/adapters/smolagents.py",
                   "airlock_client/adapters/openai_agents/__init__.py", "airlock_maf/backend.py",
                   "airlock_ray/__init__.py", "airlock_ray/py.typed"):
        assert module in names, module


def test_no_workspace_crate_can_be_published() -> None:
    """crates.io's index (2026-12-04) has none of the workspace's names but holds `airlock`
    itself; none is meant for publication, so none can be (docs/deploy.md, "Names")."""
    out = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    packages = json.loads(out)["packages"]
    assert len(packages) >= 10, [p["name"] for p in packages]
    publishable = [p["name"] for p in packages if p["publish"] != []]
    assert publishable == [], publishable


LINES = install_lines(REPO)


def test_the_docs_give_install_lines_for_the_wheel_the_repository_and_each_extra() -> None:
    args = [a for line in LINES for a in line.args]
    assert any(a.endswith(".whl") for a in args), LINES
    assert any(is_path(a) and "clients/python" in a for a in args), LINES
    named = {e for a in args if not is_path(a) and requirement_name(a) == NAME for e in extras_of(a)}
    from_anywhere = {e for a in args for e in extras_of(a)}
    assert set(EXTRAS) <= from_anywhere, (from_anywhere, LINES)
    assert named, f"no line installs {NAME} by name: {LINES}"


def unwrap(arg: str) -> str:
    """`$(ls GLOB)[extra]` (a wheel named by its glob, with an extra) as `GLOB[extra]`."""
    m = re.fullmatch(r"\$\((?:ls|echo) ([^)]+)\)(\[[^\]]*\])?", arg)
    return m.group(1) + (m.group(2) or "") if m else arg


def ours(line: InstallLine, arg: str, wheel: pathlib.Path) -> Optional[bool]:
    """True if `arg` is this repository's distribution (by name, wheel or directory); False if a
    known third-party package; None if an option."""
    if arg.startswith("-"):
        return None
    arg = unwrap(arg)
    if arg.split("[")[0].endswith(".whl"):
        pattern = pathlib.Path(arg.split("[")[0]).name
        assert fnmatch.fnmatch(wheel.name, pattern), f"{line}: {pattern} does not match {wheel.name}"
        return True
    if is_path(arg):
        project = (REPO / line.cwd / arg.split("[")[0]).resolve()
        assert (project / "pyproject.toml").is_file(), f"{line}: {project} is not a project"
        assert tomllib.loads((project / "pyproject.toml").read_text())["project"]["name"] == NAME, line
        return True
    name = requirement_name(arg)
    if name == NAME:
        return True
    assert not name.startswith("airlock"), f"{line}: {name} is not this project's name ({NAME})"
    assert name in THIRD_PARTY, f"{line}: {name} is neither {NAME} nor a known third-party package"
    return False


@pytest.mark.parametrize("line", LINES, ids=[line.where for line in LINES])
def test_each_install_line_names_this_project_or_a_known_package(line: InstallLine, wheel: pathlib.Path) -> None:
    for arg in line.args:
        ours(line, arg, wheel)
    for arg in line.args:
        for extra in extras_of(arg):
            assert extra in EXTRAS, f"{line}: no extra {extra!r} (the wheel has {EXTRAS})"


# --- offline resolution -------------------------------------------------------------------------

def resolver_python() -> Tuple[str, Dict[str, str]]:
    """A Python >= 3.12 (so the `maf` extra's marker holds): this one, or scripts/maf-python.sh's."""
    if sys.version_info >= (3, 12):
        return sys.executable, {}
    r = subprocess.run(["bash", str(REPO / "scripts" / "maf-python.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"no Python >= 3.12 to resolve the maf extra with: {r.stderr.strip()[-300:]}")
    python, libpath = r.stdout.split()
    return python, {"LD_LIBRARY_PATH": libpath}


def pip_env(extra: Dict[str, str]) -> Dict[str, str]:
    """pip without the machine's configuration (its find-links, its index) or a cache of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, **extra, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def as_install_args(line: InstallLine, wheel: pathlib.Path, for_download: bool) -> List[str]:
    """The line's arguments with the built wheel for a wheel glob (and, for a download, for this
    project's name: its files must never come from the registry)."""
    out = []
    for arg in map(unwrap, line.args):
        kind = ours(line, arg, wheel)
        extras = arg[arg.index("["):] if "[" in arg else ""
        if arg in ("--user", "--break-system-packages", "-U", "--upgrade") or (for_download and arg in ("-e", "--editable")):
            continue
        if kind and arg.split("[")[0].endswith(".whl"):
            out.append(f"{wheel}{extras}")
        elif kind and not is_path(arg) and for_download:
            out.append(f"{wheel}{extras}")
        elif kind and is_path(arg):
            out.append(str((REPO / line.cwd / arg.split("[")[0]).resolve()) + extras)
        else:
            out.append(arg)
    return out


def registry_reachable() -> bool:
    import urllib.request
    try:
        with urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=15) as r:
            return bool(r.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def wheelhouse(wheel: pathlib.Path) -> Tuple[str, Dict[str, str], pathlib.Path]:
    """Every third-party wheel the install lines need, for the resolver's Python, downloaded
    once (keyed by the lines, pyproject.toml and the Python) into the machine's test cache."""
    python, env = resolver_python()
    version = subprocess.run([python, "-c", "import sys; print(sys.version)"], capture_output=True, text=True,
                             env=pip_env(env), check=True).stdout
    lines = sorted({f"{line.cwd} {line.args}" for line in LINES})  # not where they are: an edit above moves them
    key = hashlib.sha256("\n".join([version, PYPROJECT.read_text(), *lines]).encode()).hexdigest()[:16]
    root = CACHE if os.access(CACHE, os.W_OK) else pathlib.Path(tempfile.gettempdir())
    house = root / f"wheelhouse-{key}"
    if not (house / ".complete").exists():
        house.mkdir(parents=True, exist_ok=True)
        downloads = [["setuptools>=61", "wheel"]] + [as_install_args(line, wheel, True) for line in LINES]
        for args in downloads:
            r = subprocess.run([python, "-m", "pip", "download", "--quiet", "--dest", str(house), *args],
                               capture_output=True, text=True, env=pip_env(env), timeout=600)
            if r.returncode != 0 and not registry_reachable():
                pytest.skip(f"the package registry is unreachable and no wheelhouse is cached: {r.stderr[-300:]}")
            assert r.returncode == 0, f"pip download {args}: {r.stderr[-2000:]}"
        for ours_ in house.glob(f"{NAME.replace('-', '_')}-*"):
            ours_.unlink()  # the wheel under test comes from its own directory, never from here
        (house / ".complete").touch()
    return python, env, house


# (resolved arguments) -> (pip's exit code, its stderr, its --report)
RESOLVED: Dict[Tuple[str, ...], Tuple[int, str, str]] = {}


@pytest.mark.parametrize("line", LINES, ids=[line.where for line in LINES])
def test_each_install_line_resolves_offline_against_the_built_wheel(
        line: InstallLine, wheel: pathlib.Path, wheelhouse: Tuple[str, Dict[str, str], pathlib.Path],
        tmp_path: pathlib.Path) -> None:
    python, env, house = wheelhouse
    args = tuple(as_install_args(line, wheel, False))  # paths made absolute: equal lines resolve once
    if args not in RESOLVED:
        report = tmp_path / "report.json"
        argv = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-index", "--quiet",
                "--find-links", str(wheel.parent), "--find-links", str(house), "--report", str(report), *args]
        r = subprocess.run(argv, capture_output=True, text=True, env=pip_env(env), cwd=REPO / line.cwd, timeout=300)
        report_text = report.read_text() if r.returncode == 0 else ""
        RESOLVED[args] = (r.returncode, r.stderr, report_text)
    code, stderr, report_text = RESOLVED[args]
    assert code == 0, f"{line}\n{stderr[-3000:]}"
    installed = {canonical(item["metadata"]["name"]) for item in json.loads(report_text)["install"]}
    wanted = set()
    for arg in map(unwrap, line.args):
        if ours(line, arg, wheel):
            wanted.add(NAME)
            for extra in extras_of(arg):
                deps = pyproject()["optional-dependencies"][extra]
                wanted |= {requirement_name(dep) for dep in deps}
        elif ours(line, arg, wheel) is False:
            wanted.add(requirement_name(arg))
    assert wanted <= installed, f"{line}: {sorted(wanted - installed)} not in {sorted(installed)}"
