"""Builds the airlock wheel: the release binary (installed as the `airlock` command), the
library the zygote of `airlock serve` and `airlock mcp` loads (installed beside it), the Python SDK
(`airlock_client`, with the framework adapters as extras) and the maf-sandbox backend
(`airlock_maf`, extra `maf`), the way ruff and uv ship. Its distribution name, version,
dependencies and extras are clients/python/pyproject.toml's, so `pip install '<wheel>[maf]'` and
`pip install './clients/python[maf]'` install the same name (docs/deploy.md, "Names").

Both ELF files go under `.data/scripts/`: every installer (pip, uv; venv, --user, --prefix)
puts that scheme in one directory, so the library always lands beside the binary, where the
binary looks for it (beside its own executable). pip copies a script byte for byte unless its
first line starts with `#!python` (an ELF file's never does) and only makes it executable when
the zip entry's mode has an execute bit: the library's has none (0644), so it is installed as a
readable file, not as a command.

Standard library only (Python >= 3.11 for tomllib), so it needs no build backend and no network.
The platform tag is the manylinux one the binary's glibc symbol versions allow.

Usage: python3 scripts/wheel.py BINARY ZYGOTE_LIBRARY OUT_DIR      (scripts/build-wheel.sh calls it)
Prints the wheel's path.
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import platform
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SDK = ROOT / "clients" / "python"
# The packages the wheel carries, and the source root each lives in (pyproject's packages.find).
PACKAGES = (("airlock_client", SDK / "src"), ("airlock_maf", SDK / "maf"), ("airlock_ray", SDK / "src"))
SUMMARY = ("Run untrusted, model-generated code in a rootless Linux sandbox: the airlock "
           "binary, its Python SDK (airlock_client) and a maf-sandbox backend (airlock_maf)")
# Every file gets this time, so the same inputs give the same wheel (SOURCE_DATE_EPOCH wins).
EPOCH = (1980, 1, 1, 0, 0, 0)


def workspace_version() -> str:
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    return str(cargo["workspace"]["package"]["version"])


def glibc_tag(elves: list[Path]) -> str:
    """`manylinux_2_N_ARCH` for the newest GLIBC_2.N symbol version any of `elves` needs."""
    minors = []
    for elf in elves:
        dyn = subprocess.run(["objdump", "-T", str(elf)], check=True, capture_output=True, text=True)
        found = [int(m) for m in re.findall(r"GLIBC_2\.(\d+)", dyn.stdout)]
        if not found:
            raise SystemExit(f"{elf}: no GLIBC symbol versions (is it a glibc Linux ELF file?)")
        minors += found
    return f"manylinux_2_{max(minors)}_{platform.machine()}"


def project() -> dict:
    return dict(tomllib.loads((SDK / "pyproject.toml").read_text())["project"])


def dist_name() -> str:
    """The distribution name as a wheel's file and .dist-info directory spell it (PEP 427)."""
    return re.sub(r"[-_.]+", "_", project()["name"]).lower()


def extra_requirement(dep: str, extra: str) -> str:
    """`dep` required only with `extra`; a marker of its own is kept, and-ed with the extra's."""
    req, _, marker = dep.partition(";")
    condition = f'extra == "{extra}"'
    if marker.strip():
        condition = f"({marker.strip()}) and {condition}"
    return f"{req.strip()}; {condition}"


def metadata(version: str) -> str:
    project_ = project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project_['name']}",
        f"Version: {version}",
        f"Summary: {SUMMARY}",
        "License: Apache-2.0",
        f"Requires-Python: {project_['requires-python']}",
    ]
    lines += [f"Requires-Dist: {dep}" for dep in project_["dependencies"]]
    for extra, deps in project_["optional-dependencies"].items():
        if extra == "test":
            continue
        lines.append(f"Provides-Extra: {extra}")
        lines += [f"Requires-Dist: {extra_requirement(dep, extra)}" for dep in deps]
    # The headers, a blank line, then the long description (core metadata is an email message).
    lines += ["Description-Content-Type: text/markdown", "", ""]
    return "\n".join(lines) + (SDK / "README.md").read_text()


def sdk_files() -> list[tuple[str, bytes]]:
    files = []
    for package, src in PACKAGES:
        for path in sorted((src / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.append((path.relative_to(src).as_posix(), path.read_bytes()))
    return files


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build(binary: Path, library: Path, out_dir: Path) -> Path:
    version = workspace_version()
    tag = f"py3-none-{glibc_tag([binary, library])}"
    name = dist_name()
    dist_info = f"{name}-{version}.dist-info"
    wheel_meta = f"Wheel-Version: 1.0\nGenerator: airlock scripts/wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n"
    # (name, data, mode)
    entries = [(n, d, 0o644) for n, d in sdk_files()]
    entries.append((f"{name}-{version}.data/scripts/airlock", binary.read_bytes(), 0o755))
    entries.append((f"{name}-{version}.data/scripts/{library.name}", library.read_bytes(), 0o644))
    entries.append((f"{dist_info}/METADATA", metadata(version).encode(), 0o644))
    entries.append((f"{dist_info}/WHEEL", wheel_meta.encode(), 0o644))
    record = "".join(record_line(n, d) + "\n" for n, d, _ in entries) + f"{dist_info}/RECORD,,\n"
    entries.append((f"{dist_info}/RECORD", record.encode(), 0o644))

    date = EPOCH
    if "SOURCE_DATE_EPOCH" in os.environ:
        import time
        date = time.gmtime(max(int(os.environ["SOURCE_DATE_EPOCH"]), 315532800))[:6]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}-{version}-{tag}.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name, date_time=date)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    path.write_bytes(buf.getvalue())
    return path


def main() -> None:
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    print(build(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])))


if __name__ == "__main__":
    main()
