"""maf-sandbox's own conformance suites against real airlock sandboxes, acquired through
`maf_sandbox.SandboxRouter` with its floor opted down to the rung the broker probed.

Every suite `maf_sandbox.conformance` ships runs here when airlock's declarations make it
applicable; each gets a sandbox of its own (airlock counts transfers over a sandbox's life).
Suites that do not apply, and why (each pinned by a test below, so a change in the
declarations that makes one apply fails here until it runs):

- `assert_egress_methods_conformance`: airlock's proxy does not enforce per-method rules, so
  `Capability.EGRESS_METHODS` is not declared and a spec naming methods is refused at attach.
- `assert_nothing_left_behind`: needs an engine-side fingerprint of every writable path. airlock's
  file plane sees `/work`, not `/tmp` and `/dev/shm` (the same tmpfs), so the sandbox answers
  "unsupported" rather than an incomplete view; the suite is run and reports exactly that skip.
- `assert_egress_conformance`: applies whenever `allowlist` is declared, and needs one allowed and
  one denied URL that answer 2xx. Given `AIRLOCK_MAF_EGRESS_URL` (an HTTP server reachable by the
  broker, allowed through the broker's `--allow-private`), it runs; scripts/test.sh provides one.
"""
from __future__ import annotations

import os
from urllib.parse import urlsplit
from collections.abc import Awaitable, Callable

import pytest
from maf_sandbox import (Capability, Egress, IsolationScope, ProgramRequirements, SandboxKey, SandboxRouter,
                         SandboxSpec, TransferLimits)
from maf_sandbox.conformance import (PosixGuestSubject, assert_call_scope_conformance, assert_egress_conformance,
                                     assert_exec_conformance, assert_files_delete_conformance,
                                     assert_files_in_conformance, assert_files_out_conformance,
                                     assert_fresh_acquire_conformance, assert_instance_disposal_conformance,
                                     assert_nothing_left_behind, assert_program_channel_conformance,
                                     assert_reach_conformance, assert_reclaim_conformance,
                                     assert_storage_base_conformance)

from airlock_maf import AirlockSandbox, AirlockSandboxBackend

WORK = "/work/maf"
#: airlock's per-sandbox transfer ceiling (32 files a direction, over the sandbox's life).
LIMITS = TransferLimits(8 * 1024 * 1024, 32 * 1024 * 1024, 32)
ALL = frozenset({Capability.EXEC, Capability.RUN_CODE, Capability.FILES_IN, Capability.FILES_OUT,
                 Capability.FILES_LIST, Capability.FILES_DELETE})


def spec(kind: str = "conformance", **kw: object) -> SandboxSpec:
    args: dict[str, object] = {"kind": kind, "work_dir": WORK, "requires": ALL, "files_in": LIMITS,
                               "files_out": LIMITS}
    args.update(kw)
    return SandboxSpec(**args)  # type: ignore[arg-type]


def router(backend: AirlockSandboxBackend, **kw: object) -> SandboxRouter:
    return SandboxRouter([backend], min_isolation=backend.isolation, **kw)  # type: ignore[arg-type]


def subject(backend: AirlockSandboxBackend, sandbox: object, working_directory: str = WORK) -> PosixGuestSubject:
    return PosixGuestSubject(sandbox, working_directory, backend.declarations.capabilities)  # type: ignore[arg-type]


async def one_suite(backend: AirlockSandboxBackend, unique: str,
                    run: Callable[[PosixGuestSubject], Awaitable[object]]) -> None:
    r = router(backend)
    try:
        sandbox = await r.acquire(SandboxKey("conformance", unique, "agent"), spec())
        await run(subject(backend, sandbox))
    finally:
        purge = await r.dispose_scope("conformance", unique)
        assert purge.undisposed is None, purge


def test_declarations_are_the_probed_ones(backend: AirlockSandboxBackend) -> None:
    d = backend.declarations
    assert str(backend.isolation) in ("container", "os_process")
    assert Egress.CLOSED in d.egress_modes and Egress.UNRESTRICTED not in d.egress_modes
    assert {str(f) for f in d.os_families} == {"posix"}
    assert d.isolation_scopes == frozenset({IsolationScope.CONVERSATION, IsolationScope.CALL})
    # The private broker runs on a state directory of its own, and the probe snapshotted there.
    assert Capability.SNAPSHOT in d.capabilities and Capability.ATTACHED_IDENTITY not in d.capabilities


async def test_files_out(backend: AirlockSandboxBackend, unique: str) -> None:
    await one_suite(backend, unique, assert_files_out_conformance)


async def test_files_in(backend: AirlockSandboxBackend, unique: str) -> None:
    await one_suite(backend, unique, assert_files_in_conformance)


async def test_files_delete(backend: AirlockSandboxBackend, unique: str) -> None:
    await one_suite(backend, unique, assert_files_delete_conformance)


async def test_reach(backend: AirlockSandboxBackend, unique: str) -> None:
    await one_suite(backend, unique, assert_reach_conformance)


async def test_reclaim(backend: AirlockSandboxBackend, unique: str) -> None:
    await one_suite(backend, unique, assert_reclaim_conformance)


async def test_exec(backend: AirlockSandboxBackend, unique: str) -> None:
    await one_suite(backend, unique, assert_exec_conformance)


@pytest.mark.parametrize("work_dir", [None, "/work/base/deeper"])
async def test_storage_base(backend: AirlockSandboxBackend, unique: str, work_dir: str | None) -> None:
    r = router(backend)
    try:
        sandbox = await r.acquire(SandboxKey("storage", unique, "agent"), spec(work_dir=work_dir))
        await assert_storage_base_conformance(sandbox, backend.declarations.capabilities)
    finally:
        assert (await r.dispose_scope("storage", unique)).undisposed is None


async def test_a_base_airlock_cannot_honour_is_refused(backend: AirlockSandboxBackend, unique: str) -> None:
    with pytest.raises(ValueError, match="cannot be honoured"):
        await router(backend).acquire(SandboxKey("s", unique, "a"), spec(work_dir="/maf-sandbox/work"))


async def test_fresh_acquire(backend: AirlockSandboxBackend, unique: str) -> None:
    key, s = SandboxKey("fresh", unique, "agent"), spec()
    sandbox = await backend.acquire(key, s)
    try:
        await assert_fresh_acquire_conformance(sandbox, lambda: backend.acquire(key, s))
    finally:
        assert await backend.dispose(key) is None


async def test_instance_disposal(backend: AirlockSandboxBackend, unique: str) -> None:
    key, other = SandboxKey("inst", unique, "agent"), SandboxKey("inst", unique, "agent-2")
    target = await backend.acquire(key, spec("kind-a"))
    siblings = [await backend.acquire(key, spec("kind-b")), await backend.acquire(other, spec("kind-a"))]
    try:
        await assert_instance_disposal_conformance(backend, key, "kind-a", target.instance_id,
                                                   [s.instance_id for s in siblings], backend.exists)
        assert len({target.instance_id, *(s.instance_id for s in siblings)}) == 3
    finally:
        assert (await backend.dispose_scope("inst", unique)).undisposed is None
    for s in siblings:
        assert not await backend.exists(s.instance_id), "the scope purge left a sandbox"


async def test_call_scope(backend: AirlockSandboxBackend, unique: str) -> None:
    r = router(backend)
    s = spec(isolation_scope=IsolationScope.CALL)
    first, second = SandboxKey("call", unique, "agent", "call-1"), SandboxKey("call", unique, "agent", "call-2")

    async def dispose(key: SandboxKey) -> None:
        assert await r.dispose_call(key, timeout=30, spec=s), f"disposing {key} did not land"

    try:
        sandbox = await r.acquire(first, s)

        async def another() -> PosixGuestSubject:
            return subject(backend, await r.acquire(second, s))

        await assert_call_scope_conformance(subject(backend, sandbox), another,
                                            lambda: dispose(first), lambda: dispose(second))
    finally:
        assert (await r.dispose_scope("call", unique)).undisposed is None


async def test_program_channel_with_native_host_tools(backend: AirlockSandboxBackend, unique: str) -> None:
    r = router(backend, program_channel_preference=("runtime", "exec"))
    # The default program budget (8 MiB) may be staged as a file, which the channel folds into
    # files_in; the spec leaves it the room.
    half = TransferLimits(8 * 1024 * 1024, 16 * 1024 * 1024, 16)
    s = spec(requires=ALL | {Capability.HOST_TOOLS}, program=ProgramRequirements(), files_in=half)
    try:
        sandbox = await r.acquire(SandboxKey("program", unique, "agent"), s)
        (channel,) = backend.declarations.program_channels
        await assert_program_channel_conformance(sandbox, channel, guest_call_path="calls/c1")
    finally:
        assert (await r.dispose_scope("program", unique)).undisposed is None


async def test_egress(backend: AirlockSandboxBackend, unique: str) -> None:
    """`allowlist` is declared only where the broker enforces it, so it is attacked here."""
    if Egress.ALLOWLIST not in backend.declarations.egress_modes:
        pytest.skip("allowlist egress is not enforceable on this machine (Landlock ABI < 4), so not declared")
    allowed = os.environ.get("AIRLOCK_MAF_EGRESS_URL")
    if not allowed:
        pytest.fail("set AIRLOCK_MAF_EGRESS_URL (scripts/test.sh serves one) to attack the declared allowlist")
    url = urlsplit(allowed)
    assert url.hostname and not url.hostname[0].isdigit(), "the allowed URL names its host by name"
    # The same server by its address: an IP literal matches no host rule, so only the
    # allowlist (not the range check, which --allow-private opened) can deny it.
    denied = allowed.replace(url.netloc, "127.0.0.1" + (f":{url.port}" if url.port else ""), 1)
    r = router(backend)
    try:
        sandbox = await r.acquire(SandboxKey("egress", unique, "agent"),
                                  spec(egress=Egress.ALLOWLIST, egress_allow=(url.hostname,)))
        await assert_egress_conformance(subject(backend, sandbox), allowed_url=allowed, denied_url=denied)
    finally:
        assert (await r.dispose_scope("egress", unique)).undisposed is None


def test_egress_methods_does_not_apply(backend: AirlockSandboxBackend) -> None:
    assert Capability.EGRESS_METHODS not in backend.declarations.capabilities
    assert Capability.EGRESS_PATHS not in backend.declarations.capabilities


async def test_nothing_left_behind_is_refused_not_faked(backend: AirlockSandboxBackend, unique: str) -> None:
    r = router(backend)
    try:
        sandbox = await r.acquire(SandboxKey("left", unique, "agent"), spec())
        assert isinstance(sandbox, AirlockSandbox)

        async def call() -> None:
            await sandbox.write_file("x.txt", b"x", working_directory=".")

        (result,) = await assert_nothing_left_behind(sandbox, call)
        assert result.skipped == "engine fingerprint is unsupported"
    finally:
        assert (await r.dispose_scope("left", unique)).undisposed is None
