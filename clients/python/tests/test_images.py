"""Images through the SDK: `sandbox(image=...)` runs model-written pandas code on a Debian root
imported into the server's store (built with mmdebstrap by scripts/image-fixture.sh), as root
and, rootless, as the unprivileged `airlock-test` user."""
import os
import pathlib
import pwd
import shutil
import stat
import subprocess
import tempfile

import pytest

from airlock_client import SandboxRefusedError, StdioClient
from conftest import REPO, airlock_bin

USER = "airlock-test"
PANDAS = ("import pandas as pd, numpy as np, os\n"
          "df = pd.DataFrame({'city': ['a', 'b', 'a'], 'sales': [3, 4, 5]})\n"
          "print(df.groupby('city').sales.sum().to_dict(), os.getcwd(), os.getuid())\n")


def fixture_dir() -> pathlib.Path:
    if os.geteuid() != 0:
        pytest.skip("the image fixture is built with mmdebstrap as root (scripts/test.sh)")
    out = subprocess.run(["bash", str(REPO / "scripts" / "image-fixture.sh")], env={**os.environ, "FORMATS": "oci"},
                         capture_output=True, text=True, check=True)
    return pathlib.Path(out.stdout.strip().splitlines()[-1])


class Identity:
    """Runs the binary as root or as the test user, with a store of its own."""

    def __init__(self, who: str):
        self.who = who
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="airlock-sdk-images-"))
        os.chmod(self.dir, 0o755)
        # A copy of the binary everyone can run (the build dir may be private).
        self.bin = self.dir / "airlock"
        shutil.copy(airlock_bin(), self.bin)
        os.chmod(self.bin, 0o755)
        self.store = self.dir / "store"
        self.store.mkdir()
        self.launcher = str(self.bin)
        if who != "root":
            pw = pwd.getpwnam(who)
            os.chown(self.store, pw.pw_uid, pw.pw_gid)
            self.launcher = str(self.dir / "as-user")
            with open(self.launcher, "w") as f:
                f.write(f"#!/bin/sh\nexec runuser -u {who} -- env -i PATH=/usr/bin:/bin HOME={pw.pw_dir} "
                        f"{self.bin} \"$@\"\n")
            os.chmod(self.launcher, os.stat(self.launcher).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.launcher, *args], capture_output=True, text=True)

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module", params=["root", USER])
def identity(request):
    fixture = fixture_dir()
    if request.param != "root":
        try:
            pwd.getpwnam(request.param)
        except KeyError:
            pytest.fail(f"create the user {USER} (scripts/test.sh does): the rootless path must be tested")
    ident = Identity(request.param)
    done = ident.run("image", "--image-dir", str(ident.store), "import", str(fixture / "oci.tar"), "--name", "pandas")
    assert done.returncode == 0, done.stderr
    yield ident
    ident.close()


async def test_a_sandbox_runs_pandas_on_an_image(identity):
    client = await StdioClient.start(identity.launcher, args=["--image-dir", str(identity.store)])
    try:
        sb = await client.sandbox(image="pandas")
        r = await sb.run_code(PANDAS)
        assert r.ok, r
        assert r.stdout == "{'a': 8, 'b': 4} /srv 1000\n", r
        await sb.files.write("in.csv", "x\n1\n2\n")
        r = await sb.run_code("import pandas as pd; print(pd.read_csv('/work/in.csv').x.sum())")
        assert r.stdout == "3\n", r
        # A stateful sandbox's kernel is the image's interpreter too: state lives across cells.
        kernel = await client.sandbox(image="pandas", stateful=True)
        await kernel.run_code("import pandas as pd\ndf = pd.DataFrame({'x': [1, 2, 3]})")
        r = await kernel.run_code("df.x.max()")
        assert r.ok and r.value is not None and r.value.repr == "3", r
        with pytest.raises(SandboxRefusedError):
            await client.sandbox(image="no-such-image")
    finally:
        await client.close()
