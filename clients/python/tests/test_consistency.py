"""The SDK says what every other front end says, through a real `airlock serve --stdio` it
spawns, as root and, rootless, as the unprivileged `airlock-test` user:

- a timed-out run's `exit_code` is 124 (`execute`, `run_code` one-shot and stateful, `exec`);
- `files.write` returns the `FileStat` that `files.stat` returns (`kind` "file");
- the spawned server writes only warnings and errors to the host program's stderr, with no
  ANSI colour (stderr is not a terminal); `log_level="info"` brings the INFO lines back."""
import asyncio
import os
import pathlib
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile

import pytest

from airlock_client import StdioClient
from conftest import SRC, airlock_bin

USER = "airlock-test"


class Identity:
    """A launcher that runs a world-readable copy of the binary (and its zygote library) as root
    or as `who`."""

    def __init__(self, who: str):
        self.who = who
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="airlock-sdk-consistency-"))
        os.chmod(self.dir, 0o755)
        binary = self.dir / "airlock"
        shutil.copy(airlock_bin(), binary)
        os.chmod(binary, 0o755)
        # As installed: the zygote's library beside the binary (without it the server warns).
        zygote = pathlib.Path(airlock_bin()).with_name("libairlock_zygote.so")
        if zygote.exists():
            shutil.copy(zygote, self.dir / zygote.name)
            os.chmod(self.dir / zygote.name, 0o755)
        self.launcher = str(binary)
        # A state directory of its own: the machine's default may be held by another server,
        # which is worth a warning that these tests are not about.
        state = self.dir / "state"
        state.mkdir()
        os.chmod(state, 0o700)  # a snapshot store is closed to group and others
        self.args = ["--state-dir", str(state)]
        if who != "root":
            pw = pwd.getpwnam(who)
            os.chown(state, pw.pw_uid, pw.pw_gid)
            self.launcher = str(self.dir / "as-user")
            with open(self.launcher, "w") as f:
                f.write(f"#!/bin/sh\nexec runuser -u {who} -- env -i PATH=/usr/bin:/bin HOME={pw.pw_dir} "
                        f"{binary} \"$@\"\n")
            os.chmod(self.launcher, os.stat(self.launcher).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture(scope="module", params=["root", USER])
def identity(request):
    if request.param != "root":
        if os.geteuid() != 0:
            pytest.skip("switching to airlock-test needs root")
        try:
            pwd.getpwnam(request.param)
        except KeyError:
            pytest.fail(f"create the user {USER} (scripts/test.sh does): the rootless path must be tested")
    ident = Identity(request.param)
    yield ident
    shutil.rmtree(ident.dir, ignore_errors=True)


async def test_a_timeout_is_exit_code_124_everywhere(identity):
    c = await StdioClient.start(identity.launcher, args=identity.args)
    try:
        results = {
            "execute": await c.execute("while True: pass", timeout=1),
            "execute argv": await c.execute(argv=["/bin/sleep", "30"], timeout=1),
        }
        for stateful in (False, True):
            sb = await c.sandbox(stateful=stateful)
            results[f"run_code stateful={stateful}"] = await sb.run_code("while True: pass", timeout=1)
            results[f"exec stateful={stateful}"] = await sb.exec(["/bin/sleep", "30"], timeout=1)
            await sb.dispose()
    finally:
        await c.close()
    for what, r in results.items():
        assert (r.status, r.exit_code, r.error and r.error.code) == ("timeout", 124, -32002), (what, r)


async def test_files_write_returns_what_stat_returns(identity):
    c = await StdioClient.start(identity.launcher, args=identity.args)
    try:
        sb = await c.sandbox()
        small = await sb.files.write("d/small.txt", "hi")
        big = await sb.files.write("big.bin", b"x" * (700 * 1024))  # two chunks: replace, append
        stats = [await sb.files.stat("d/small.txt"), await sb.files.stat("big.bin")]
        await sb.dispose()
    finally:
        await c.close()
    assert [small, big] == stats
    assert [s.kind for s in stats] == ["file", "file"] and big.size == 700 * 1024


HOST_PROGRAM = """
import asyncio, sys
from airlock_client import StdioClient

async def main(launcher, state, level):
    kw = {} if level == "default" else {"log_level": level}
    c = await StdioClient.start(launcher, args=["--state-dir", state], **kw)
    sb = await c.sandbox()
    r = await sb.run_code("print(6*7)")
    await sb.files.write("a.txt", "x")
    await sb.dispose()
    r2 = await c.execute("print(1)")
    await c.close()
    print(r.stdout.strip(), r2.stdout.strip())

asyncio.run(main(*sys.argv[1:4]))
"""


def host_program_stderr(identity: Identity, level: str, rust_log=None) -> str:
    """Runs a program that uses the SDK as a host program would (its stderr a pipe, as under
    a supervisor or an agent framework); returns that program's stderr."""
    env = {k: v for k, v in os.environ.items() if k != "RUST_LOG"}
    env["PYTHONPATH"] = str(SRC)
    if rust_log is not None:
        env["RUST_LOG"] = rust_log
    out = subprocess.run([sys.executable, "-c", HOST_PROGRAM, identity.launcher, identity.args[1], level], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "42 1\n", out.stdout
    return out.stderr


def test_a_spawned_server_writes_only_warnings_and_no_colour_to_the_host_s_stderr(identity):
    # The default, even under an ambient RUST_LOG=info (the flag the SDK passes wins).
    for rust_log in (None, "info"):
        err = host_program_stderr(identity, "default", rust_log)
        assert err == "", (rust_log, err)
    err = host_program_stderr(identity, "info")
    assert sum(" INFO " in line for line in err.splitlines()) >= 4, err
    assert "connection opened" in err, err
    assert "\x1b" not in err, repr(err)


def test_log_level_given_in_args_is_not_doubled(identity):
    # A caller's own `--log-level` in `args` wins over the keyword (one flag reaches the binary).
    async def main():
        c = await StdioClient.start(identity.launcher, args=[*identity.args, "--log-level", "error"])
        r = await c.execute("print(2)")
        await c.close()
        return r
    assert asyncio.run(main()).stdout == "2\n"
