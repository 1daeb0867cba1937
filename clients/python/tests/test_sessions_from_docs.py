"""The session methods (docs/server.md, "Sandboxes that persist"), driven with nothing but the
`websockets` library and what docs/server.md and docs/protocol.md say: a client an orchestrator
author could write from the docs alone. It does not use airlock_client on purpose."""
import asyncio
import base64
import json

from websockets.asyncio.client import connect

# docs/protocol.md, "Error codes".
INVALID_PARAMS = -32602
SANDBOX_REFUSED = -32007
NOT_FOUND = -32016
# docs/server.md, "Files": at most 512 KiB per call.
CHUNK = 512 * 1024


class Rpc:
    """JSON-RPC 2.0 over one WebSocket: one message per text message."""

    def __init__(self, ws):
        self.ws = ws
        self.next_id = 1
        self.early = {}  # responses that arrived while waiting for another id

    async def request(self, method, params):
        rid = self.next_id
        self.next_id += 1
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
        return rid

    async def response(self, rid):
        """The response to `rid` and the notifications that came before it, in order."""
        notes = []
        while rid not in self.early:
            msg = json.loads(await asyncio.wait_for(self.ws.recv(), timeout=60))
            assert msg["jsonrpc"] == "2.0", msg
            if "method" in msg:
                assert "id" not in msg, f"no request expected from the broker here: {msg}"
                notes.append(msg)
            else:
                self.early[msg["id"]] = msg
        return self.early.pop(rid), notes

    async def call(self, method, params):
        msg, _ = await self.response(await self.request(method, params))
        return msg


def ok(msg):
    assert "error" not in msg, msg
    return msg["result"]


def code_of(msg):
    assert "result" not in msg, msg
    return msg["error"]["code"]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def session(server):
    return connect(server.url, additional_headers={"Authorization": f"Bearer {server.token}"},
                   max_size=2 ** 21)


STREAMER = """
import time
nums = [int(x) for x in open('data/in.txt').read().split()]
for i, n in enumerate(nums):
    print(f'got {n}', flush=True)
    time.sleep(0.2)
open('out.txt', 'w').write(f'sum={sum(nums)}\\n')
print('done')
"""


async def create_write_run_read_stream_dispose(server):
    async with session(server) as ws:
        rpc = Rpc(ws)
        requires = ["run_code", "files_in", "files_out", "files_list"]
        d = ok(await rpc.call("sandbox.create", {"spec": {
            "requires": requires, "egress": "closed", "isolation_scope": "conversation",
            "limits": {"timeout_s": 30, "memory_mb": 256}, "idle_timeout_s": 600}}))
        sid = d["sandbox_id"]
        assert d["work_dir"] == "/work"
        assert d["egress"] == "closed"
        assert d["isolation_scope"] == "conversation"
        assert sorted(d["requires"]) == sorted(requires)
        assert d["idle_timeout_s"] == 600

        # files.write: missing parents are created; the result is what files.stat says of it.
        w = ok(await rpc.call("files.write", {"sandbox_id": sid, "path": "data/in.txt",
                                              "data": b64(b"3\n4\n5\n")}))
        assert isinstance(w.pop("modified_ms"), int)
        assert w == {"path": "data/in.txt", "exists": True, "size": 6, "is_dir": False, "kind": "file",
                     "mode": 0o600, "permissions": "rw-------"}

        # A streamed run: `output` notifications, in order, before the run's response.
        rid = await rpc.request("sandbox.run_code", {"sandbox_id": sid, "code": STREAMER,
                                                     "stream": True, "timeout_s": 20})
        resp, notes = await rpc.response(rid)
        r = ok(resp)
        assert r["status"] == "completed", r
        assert r["sandbox_id"] == sid
        assert r["stdout"] == "got 3\ngot 4\ngot 5\ndone\n"
        outputs = [n for n in notes if n["method"] == "output"]
        assert all(n["params"]["run_id"] == r["run_id"] for n in outputs), outputs
        streamed = "".join(n["params"]["data"] for n in outputs if n["params"]["stream"] == "stdout")
        assert streamed == r["stdout"]
        assert len(outputs) >= 3, outputs

        # files.read: what the run wrote.
        got = ok(await rpc.call("files.read", {"sandbox_id": sid, "path": "out.txt"}))
        assert base64.b64decode(got["data"]) == b"sum=12\n"
        assert (got["path"], got["offset"], got["size"], got["eof"]) == ("out.txt", 0, 7, True)

        # The next run is a fresh process over the same files.
        r2 = ok(await rpc.call("sandbox.run_code", {"sandbox_id": sid,
                                                    "code": "print(open('out.txt').read(), end='')"}))
        assert r2["stdout"] == "sum=12\n", r2
        assert r2["run_id"] != r["run_id"]

        entries = ok(await rpc.call("files.list", {"sandbox_id": sid}))["entries"]
        assert [(e["name"], e["is_dir"]) for e in entries] == [("data", True), ("out.txt", False)]
        st = ok(await rpc.call("files.stat", {"sandbox_id": sid, "path": "out.txt"}))
        assert (st["exists"], st["size"], st["is_dir"]) == (True, 7, False)

        # Refusals: a path out of /work, a capability the spec did not require.
        bad = await rpc.call("files.read", {"sandbox_id": sid, "path": "../etc/passwd"})
        assert code_of(bad) == INVALID_PARAMS
        no_delete = await rpc.call("files.remove", {"sandbox_id": sid, "path": "out.txt"})
        assert code_of(no_delete) == SANDBOX_REFUSED

        gone = ok(await rpc.call("sandbox.dispose", {"sandbox_id": sid}))
        assert gone == {"sandbox_id": sid, "disposal": None}
        for method, params in [("files.read", {"sandbox_id": sid, "path": "out.txt"}),
                               ("sandbox.connect", {"sandbox_id": sid})]:
            assert code_of(await rpc.call(method, params)) == NOT_FOUND


def test_create_write_run_read_stream_dispose(server):
    asyncio.run(create_write_run_read_stream_dispose(server))


async def chunked_round_trip(server):
    blob = bytes((i * 31 + i // 1000) % 256 for i in range(2 * CHUNK + 12345))
    async with session(server) as ws:
        rpc = Rpc(ws)
        sid = ok(await rpc.call("sandbox.create", {"spec": {}}))["sandbox_id"]
        for off in range(0, len(blob), CHUNK):
            w = ok(await rpc.call("files.write", {"sandbox_id": sid, "path": "blob.bin",
                                                  "data": b64(blob[off:off + CHUNK]), "offset": off}))
            assert w["size"] == min(off + CHUNK, len(blob))
        code = "b = open('blob.bin', 'rb').read()\nopen('copy.bin', 'wb').write(b)\nprint(len(b))"
        r = ok(await rpc.call("sandbox.run_code", {"sandbox_id": sid, "code": code}))
        assert r["stdout"] == f"{len(blob)}\n", r
        back, eof = b"", False
        while not eof:
            c = ok(await rpc.call("files.read", {"sandbox_id": sid, "path": "copy.bin",
                                                 "offset": len(back), "length": CHUNK}))
            back += base64.b64decode(c["data"])
            eof = c["eof"]
        assert back == blob
        ok(await rpc.call("sandbox.dispose", {"sandbox_id": sid}))


def test_files_move_in_512_kib_chunks(server):
    asyncio.run(chunked_round_trip(server))


async def wait_for_note(rpc, method, process_id, notes, timeout=30):
    """Notifications arrive between responses; read until one names `process_id`."""
    for n in notes:
        if n["method"] == method and n["params"].get("process_id") == process_id:
            return n, notes
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        msg = json.loads(await asyncio.wait_for(rpc.ws.recv(), timeout=max(0.1, end - loop.time())))
        if "id" in msg:
            rpc.early[msg["id"]] = msg
            continue
        notes.append(msg)
        if msg["method"] == method and msg["params"].get("process_id") == process_id:
            return msg, notes


async def processes_ports_list_and_timeouts(server):
    """docs/server.md, "Background processes and terminals", "Ports", "sandbox.list" and
    "sandbox.set_timeout": the wire as written there."""
    async with session(server) as ws:
        rpc = Rpc(ws)
        spec = {"requires": ["exec", "processes", "ports"], "metadata": {"task": "docs"}}
        sid = ok(await rpc.call("sandbox.create", {"spec": spec}))["sandbox_id"]
        # A process reading its stdin: input, close_stdin, its output and exit as notifications.
        msg, notes = await rpc.response(await rpc.request(
            "process.start", {"sandbox_id": sid, "argv": ["/bin/cat"], "stdin": True}))
        pid = ok(msg)["process_id"]
        assert pid.startswith(sid + "."), pid
        # (the notifications that come before each response are kept: the output is among them)
        msg, more = await rpc.response(await rpc.request(
            "process.input", {"process_id": pid, "data": b64(b"typed\n")}))
        notes += more
        assert ok(msg)["bytes"] == 6
        msg, more = await rpc.response(await rpc.request("process.close_stdin", {"process_id": pid}))
        notes += more
        assert ok(msg)["process_id"] == pid
        exited, notes = await wait_for_note(rpc, "process.exited", pid, notes)
        assert exited["params"]["exit_code"] == 0, exited
        out = b"".join(base64.b64decode(n["params"]["data"]) for n in notes
                       if n["method"] == "output" and n["params"].get("process_id") == pid)
        assert out == b"typed\n", notes
        waited = ok(await rpc.call("process.wait", {"process_id": pid, "timeout_s": 5}))
        assert (waited["state"], waited["exit_code"]) == ("exited", 0), waited
        kept = ok(await rpc.call("process.output", {"process_id": pid}))
        assert (kept["encoding"], base64.b64decode(kept["stdout"])) == ("base64", b"typed\n"), kept
        # A background server on the sandbox's loopback, exposed on the server's listener.
        srv = ok(await rpc.call("process.start", {"sandbox_id": sid, "argv": [
            "python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"]}))["process_id"]
        listed = ok(await rpc.call("process.list", {"sandbox_id": sid}))["processes"]
        assert [p["process_id"] for p in listed] == [pid, srv], listed
        exposed = ok(await rpc.call("sandbox.expose", {"sandbox_id": sid, "port": 8000}))
        assert exposed["port"] == 8000 and exposed["url"].startswith("http://"), exposed
        assert ok(await rpc.call("sandbox.unexpose", {"sandbox_id": sid, "port": 8000}))["port"] == 8000
        sig = ok(await rpc.call("process.signal", {"process_id": srv, "signal": "SIGTERM"}))
        assert sig["delivered"] is True, sig
        done = ok(await rpc.call("process.wait", {"process_id": srv, "timeout_s": 30}))
        assert (done["state"], done["signal"]) == ("exited", 15), done
        # Listing and lifetimes.
        mine = [s for s in ok(await rpc.call("sandbox.list", {}))["sandboxes"] if s["sandbox_id"] == sid]
        assert mine and mine[0]["metadata"] == {"task": "docs"}, mine
        assert ok(await rpc.call("sandbox.set_timeout", {"sandbox_id": sid, "idle_timeout_s": 60}))[
            "idle_timeout_s"] == 60
        assert code_of(await rpc.call("process.wait", {"process_id": sid + ".proc-99"})) == NOT_FOUND
        ok(await rpc.call("sandbox.dispose", {"sandbox_id": sid}))


def test_processes_ports_list_and_timeouts_from_the_docs(server):
    asyncio.run(processes_ports_list_and_timeouts(server))


async def snapshots_pause_resume_fork(server):
    """docs/server.md, "Snapshots, pause, resume and fork", method by method."""
    async with session(server) as ws:
        rpc = Rpc(ws)
        spec = {"stateful": True, "requires": ["run_code", "files_in", "files_out", "snapshot"]}
        sid = ok(await rpc.call("sandbox.create", {"spec": spec}))["sandbox_id"]
        ok(await rpc.call("files.write", {"sandbox_id": sid, "path": "f.txt", "data": b64(b"kept")}))
        run = ok(await rpc.call("sandbox.run_code", {"sandbox_id": sid, "code": "x = 41\ng = (i for i in [])"}))
        assert run["status"] == "completed", run

        snap = ok(await rpc.call("sandbox.snapshot", {"sandbox_id": sid}))
        assert snap["sandbox_id"] == sid and len(snap["snapshot_id"]) == 64 and snap["bytes"] > 0
        # Carried as the kernel's process image: the generator too.
        assert snap["kernel"]["carried"] == "image" and {"x", "g"} <= set(snap["kernel"]["saved"]), snap

        made = ok(await rpc.call("sandbox.create", {"from_snapshot": snap["snapshot_id"]}))
        copy = made["sandbox_id"]
        assert copy != sid
        run = ok(await rpc.call("sandbox.run_code", {"sandbox_id": copy, "code": "x + 1"}))
        assert run["value"]["json"] == 42, run
        back = ok(await rpc.call("files.read", {"sandbox_id": copy, "path": "f.txt"}))
        assert base64.b64decode(back["data"]) == b"kept", back

        paused = ok(await rpc.call("sandbox.pause", {"sandbox_id": sid}))
        assert paused["state"] == "paused", paused
        listed = ok(await rpc.call("sandbox.list", {}))["sandboxes"]
        entry = next(e for e in listed if e["sandbox_id"] == sid)
        assert entry["state"] == "paused" and entry["snapshot_id"] == paused["snapshot_id"], entry
        # Any call on a paused id resumes it first.
        run = ok(await rpc.call("sandbox.run_code", {"sandbox_id": sid, "code": "x"}))
        assert run["value"]["json"] == 41, run
        ok(await rpc.call("sandbox.pause", {"sandbox_id": sid}))
        described = ok(await rpc.call("sandbox.resume", {"sandbox_id": sid}))
        assert described["sandbox_id"] == sid, described

        forked = ok(await rpc.call("sandbox.fork", {"sandbox_id": sid, "count": 2}))
        assert forked["sandbox_id"] == sid and len(forked["sandbox_ids"]) == 2, forked
        b1, b2 = forked["sandbox_ids"]
        ok(await rpc.call("sandbox.run_code", {"sandbox_id": b1, "code": "x = 0"}))
        for b, want in ((b1, 0), (b2, 41), (sid, 41)):
            run = ok(await rpc.call("sandbox.run_code", {"sandbox_id": b, "code": "x"}))
            assert run["value"]["json"] == want, (b, run)
        assert code_of(await rpc.call("sandbox.fork", {"sandbox_id": sid, "count": 17})) == INVALID_PARAMS

        snaps = ok(await rpc.call("snapshot.list", {}))["snapshots"]
        kept = next(s for s in snaps if s["snapshot_id"] == snap["snapshot_id"])
        assert kept["kept"] is True and kept["paused_sandboxes"] == [], kept
        removed = ok(await rpc.call("snapshot.remove", {"snapshot_id": snap["snapshot_id"]}))
        assert removed == {"snapshot_id": snap["snapshot_id"], "removed": True}, removed
        gone = await rpc.call("sandbox.create", {"from_snapshot": snap["snapshot_id"]})
        assert code_of(gone) == NOT_FOUND, gone
        for s in (sid, copy, b1, b2):
            ok(await rpc.call("sandbox.dispose", {"sandbox_id": s}))


def test_snapshots_pause_resume_and_fork_from_the_docs(server):
    asyncio.run(snapshots_pause_resume_fork(server))
