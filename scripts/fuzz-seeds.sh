#!/usr/bin/env bash
# Seed corpora for every fuzz target, written into fuzz/corpus/TARGET/ (gitignored; libFuzzer
# adds what it finds there). Sourced by scripts/fuzz-smoke.sh and scripts/fuzz-soak.sh with the
# current directory at fuzz/. Seeds come from the protocol docs (docs/server.md, protocol.md,
# files.md, mcp.md, policy.md) and the attack tests (the egress head smuggling cases,
# traversing paths, forged attestations). A seed's first byte is the target's selector where
# it has one (given in octal; guest_messages takes a second, the exit code: '003\000').

# seed TARGET NAME SELECTOR BODY: SELECTOR (octal escapes, or "" for none) then BODY verbatim.
seed() {
    mkdir -p "corpus/$1"
    { [ -n "$3" ] && printf "\\$3"; printf '%s' "$4"; } >"corpus/$1/$2"
}
# frame SELECTOR BODY: one Content-Length frame.
frame() {
    printf "\\$1"; printf 'Content-Length: %d\r\n\r\n' "${#2}"; printf '%s' "$2"
}

mkdir -p corpus/frame_reader
frame 000 '{"jsonrpc":"2.0","method":"ready"}' >corpus/frame_reader/notification
frame 001 '{"jsonrpc":"2.0","id":1,"method":"execute","params":{"code":""}}' \
    >corpus/frame_reader/request-one-byte-reads
frame 020 '{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"m"}}' \
    >corpus/frame_reader/error-small-caps

# tar_reader: a one-file ustar archive (header, 512-byte body block, two zero blocks).
mkdir -p corpus/tar_reader
if command -v python3 >/dev/null; then
    python3 - <<'PY'
import io, tarfile
for name, kind in [("file", tarfile.REGTYPE), ("link", tarfile.SYMTYPE), ("dir", tarfile.DIRTYPE)]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        info = tarfile.TarInfo("usr/lib/x")
        info.type = kind
        data = b"hello" if kind == tarfile.REGTYPE else b""
        info.size = len(data)
        info.linkname = "../../etc/passwd" if kind == tarfile.SYMTYPE else ""
        t.addfile(info, io.BytesIO(data))
    open(f"corpus/tar_reader/{name}", "wb").write(buf.getvalue())
PY
fi

# snapshot_body: a payload (selector 1) and the same payload as a body of stored blocks
# (selector 0): work/ with a file, a link to /etc and an entry beneath the link's name, tmp/
# sticky; a set-uid file; kernel state.
mkdir -p corpus/snapshot_body
if command -v python3 >/dev/null; then
    python3 - <<'PY'
import struct
def name(n): return bytes([len(n)]) + n
def meta(mode): return struct.pack("<Iqi", mode, 1_600_000_000, 5)
def chunks(b): return (struct.pack("<I", len(b)) + b if b else b"") + struct.pack("<I", 0)
p = struct.pack("<I", 2) + b"{}" + b"\x01" + chunks(b"kernel state")
p += b"D" + name(b"work") + meta(0o755)
p += b"F" + name(b"a.py") + meta(0o4755) + chunks(b"print(1)\n")
p += b"L" + name(b"etc") + struct.pack("<H", 4) + b"/etc"
p += b"D" + name(b"etc") + meta(0o755) + b"F" + name(b"passwd") + meta(0o644) + chunks(b"x") + b"U"
p += b"U" + b"D" + name(b"tmp") + meta(0o1777) + b"U"
p += b"E" + struct.pack("<QQ", 6, 9 + 4 + 1)
body = b"\x02" + struct.pack("<II", len(p), len(p)) + p + b"\x00" * 9
open("corpus/snapshot_body/payload", "wb").write(b"\x01" + p)
open("corpus/snapshot_body/body", "wb").write(b"\x00" + body)
PY
fi

J=jsonrpc_decode
seed $J request '' '{"jsonrpc":"2.0","id":1,"method":"execute","params":{"code":"print(1)","limits":{"timeout_s":10},"env":{"K":"v"},"tools":["add"]}}'
seed $J call-tool '' '{"jsonrpc":"2.0","id":"run-mx67l867-1.t1","method":"call_tool","params":{"tool":"add","args":{"a":2,"b":3},"run_id":"run-mx67l867-1"}}'
seed $J result '' '{"jsonrpc":"2.0","id":"run-1.t1","result":5}'
seed $J error '' '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error","data":{"kind":"x"}}}'
seed $J notification '' '{"jsonrpc":"2.0","method":"output","params":{"run_id":"r","stream":"stdout","data":"aGk="}}'
seed $J duplicate-id '' '{"jsonrpc":"2.0","id":1,"id":2,"method":"execute"}'
seed $J batch '' '[{"jsonrpc":"2.0","method":"ready"}]'
seed $J escapes '' '{"jsonrpc":"2.0","id":"\u0069\ud83d\ude00","method":"m\u0000","params":[1e400,-0,0.1]}'

H=egress_head
seed $H connect 000 $'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'
seed $H get 001 $'GET http://example.com/a?b=c#f HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\n\r\n'
seed $H post 003 $'POST http://[::1]:8080/p HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello'
seed $H bare-lf-target 000 $'GET http://a.example/\nHost: evil\r\n\r\n'
seed $H tab-target 000 $'GET http://a.example/\tHTTP/1.1\r\nHost: a.example\r\n\r\n'
seed $H two-hosts 000 $'GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n'
seed $H chunked 000 $'POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'
seed $H obs-fold 000 $'GET http://a.example/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n'
seed $H credentials 020 $'GET http://u:p@a.example/ HTTP/1.1\r\n\r\n'

S=session_params
seed $S execute 000 '{"code":"print(1)","limits":{"timeout_s":10,"memory_mb":256,"max_tool_calls":16,"max_output_bytes":65536},"env":{"K":"v"},"tools":["add"]}'
seed $S execute-argv 000 '{"argv":["/bin/echo","hi"]}'
seed $S create 001 '{"spec":{"requires":["run_code","files_in","files_out","files_list"],"egress":"closed","isolation_scope":"conversation","limits":{"timeout_s":30,"memory_mb":512},"files_in":{"max_bytes_per_file":8388608,"max_total_bytes":33554432,"max_files":32},"idle_timeout_s":600,"declared_outputs":[{"path":"out/a.png","media_type":"image/png"}]},"key":{"scope":"tenant-a","thread_id":"conversation-7"}}'
seed $S create-egress 001 '{"spec":{"egress":"allowlist","egress_allow":["pypi.org","*.example.com:443"],"image":"pandas:1","tools":[{"name":"add"}],"requires":["host_tools"]}}'
seed $S connect 002 '{"sandbox_id":"sb-1"}'
seed $S run-code 003 '{"sandbox_id":"sb-1","code":"x = 41\nx + 1","timeout_s":5,"stream":true,"output_encoding":"base64"}'
seed $S exec 004 '{"sandbox_id":"sb-1","argv":["ls","-l"],"env":{"A":"b"},"cwd":"sub"}'
seed $S scope-dispose 006 '{"scope":"tenant-a","thread_id":"conversation-7"}'
seed $S cancel 007 '{"run_id":"run-1"}'
seed $S write 010 '{"sandbox_id":"sb-1","path":"data/in.csv","data":"aGVsbG8=","offset":0}'
seed $S write-traverse 010 '{"sandbox_id":"sb-1","path":"../etc/passwd","data":"eA=="}'
seed $S read 011 '{"sandbox_id":"sb-1","path":"out.txt","offset":524288,"length":1024}'
seed $S list 012 '{"sandbox_id":"sb-1"}'
seed $S stat 013 '{"sandbox_id":"sb-1","path":"a/./b"}'
seed $S remove 014 '{"sandbox_id":"sb-1","path":"/abs"}'
seed $S collect 015 '{"sandbox_id":"sb-1","outputs":[{"path":"plot.png","name":"plot","media_type":"image/png","required":false}]}'

M=mcp_stdio
seed $M session 000 $'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}\n{"jsonrpc":"2.0","method":"notifications/initialized"}\n{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n'
seed $M call 001 $'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec","arguments":{"argv":["ls"],"env":{"A":"b"},"outputs":["o.txt"],"timeout_s":3}}}\r\n'
seed $M write 020 $'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt","content":"aGk=","encoding":"base64"}}}\n\n{"jsonrpc":"2.0","id":4,"method":"notifications/cancelled","params":{"requestId":2}}\n'

A=mcp_tool_args
seed $A execute 000 '{"code":"print(1)","outputs":["out/plot.png"],"timeout_s":10}'
seed $A run-python 001 '{"code":"x=1"}'
seed $A exec 002 '{"argv":["/bin/echo","hi"],"env":{"PATH":"/usr/bin"},"timeout_s":0.5}'
seed $A write 003 '{"path":"data/a.bin","content":"AAEC","encoding":"base64"}'
seed $A read 004 '{"path":"a.txt","max_bytes":100}'
seed $A list 005 '{"path":"/work/"}'

seed policy_toml full '' $'floor = "namespaces"\nmin_isolation_scope = "conversation"\ndenied_capabilities = ["exec"]\ndenied_identities = []\nfailed_reclaim = "quarantine"\n\n[limits]\ntimeout_seconds = 30\nmemory_mb = 512\nmax_tool_calls = 16\nmax_output_bytes = 65536\ndisk_mb = 64\n\n[limits.files_in]\nmax_bytes_per_file = 1048576\nmax_total_bytes = 8388608\nmax_files = 16\n\n[server]\nmax_sandboxes = 8\nmax_concurrent_runs = 2\n\n[restricted_profile]\nbuiltins = ["print"]\nblocked_imports = ["os"]\n'
seed policy_toml bad-key '' $'[limits]\ntimeout_seconds = 1e9\nunknown = 1\n'

seed mcp_toml upstreams '' $'[upstreams]\nweather = "python3 weather_server.py --units metric"\ngithub = ["npx", "-y", "@modelcontextprotocol/server-github"]\n'
seed mcp_toml flag '' $'weather=python3 \'srv.py\' --city "New York" a\\ b'

seed attestation good '' '{"no_new_privs":true,"seccomp_mode":2,"cap_eff":0,"cap_prm":0,"uid_map":"0 1000 1","interfaces":["lo"],"namespaces":{"user":"user:[1]","net":"net:[2]","ipc":"ipc:[3]","uts":"uts:[4]","mnt":"mnt:[5]","pid":"pid:[6]","cgroup":"cgroup:[7]"},"pid":1}'
seed attestation shared-net '' '{"no_new_privs":true,"seccomp_mode":2,"cap_eff":0,"cap_prm":0,"uid_map":"0 1000 1\n1 1001 1","interfaces":["eth0","lo"],"namespaces":{"user":"user:[1]","net":"net:[4026531835]"},"pid":2}'
seed attestation refused '' '{"layer":"landlock","message":"kernel too old"}'

seed kernel_notify displays '' '[{"mime":"image/png","data":"iVBORw0KGgpyZXN0"},{"mime":"text/plain","data":"aGk="},{"mime":"image/jpeg","data":"/9j/"}]'
seed kernel_notify answer '' '{"status":"completed","exit_code":0,"value":{"repr":"42","json":42}}'
seed kernel_notify error '' '{"status":"error","exit_code":1,"error":{"type":"ValueError","message":"x"}}'

# guest_messages: selector (bits 0-1 max_tool_calls, bit 2 a 64-byte response cap, bit 3 a failing
# handler, bits 4-7 the output cap), exit code, then one message per line; an empty line
# finishes the call in flight.
G=guest_messages
seed $G calls '003\000' $'{"jsonrpc":"2.0","id":7,"method":"call_tool","params":{"tool":"add","args":{"a":2,"b":3}}}\n\n{"jsonrpc":"2.0","id":"s","method":"call_tool","params":{"tool":"x"}}\n{"jsonrpc":"2.0","id":8,"method":"call_tool","params":{"tool":"y","args":[1]}}\n\n{"jsonrpc":"2.0","id":1,"result":{"status":"completed","exit_code":0}}\n'
seed $G busy-limit '001\000' $'{"jsonrpc":"2.0","id":1,"method":"call_tool","params":{"tool":"a"}}\n{"jsonrpc":"2.0","id":2,"method":"call_tool","params":{"tool":"b"}}\n{"jsonrpc":"2.0","id":3,"method":"call_tool","params":[]}\n'
seed $G big-answer '024\000' $'{"jsonrpc":"2.0","id":9,"method":"call_tool","params":{"tool":"t","args":{"k":"0123456789012345678901234567890123456789012345678901234567890123456789"}}}\n\n'
seed $G failing '013\000' $'{"jsonrpc":"2.0","id":4,"method":"call_tool","params":{"tool":"t","args":null}}\n\n'
seed $G report-error '362\001' $'{"jsonrpc":"2.0","id":1,"result":{"status":"error","exit_code":1,"error":{"type":"MemoryError","message":"x"}}}\n'
seed $G stray-response '000\000' $'{"jsonrpc":"2.0","id":"run-1.t1","result":null}\n'
seed $G forged-refusal '000\000' $'{"jsonrpc":"2.0","method":"refused","params":{"layer":"seccomp","message":"m"}}\n'
seed $G utf8-cut '120\000' $'h\xc3\xa9llo w\xe2\x82\xacrld \xf0\x9f\x98\x80\xff\n'

# ws_handshake: selector (read size), an upgrade request head, then one masked text frame (zero
# mask key). A frame needs a read size that divides the head's length (204 bytes here: 12), so
# nothing follows the head in the read that ends it, in at most 64 reads (tungstenite refuses
# a head that comes in smaller pieces, as an attack).
ws_seed() {
    mkdir -p corpus/ws_handshake
    {
        printf "\\$2"; printf '%s' "$3"
        if [ -n "${4:-}" ]; then
            printf '\201'; printf "\\$(printf '%03o' $((128 + ${#4})))"; printf '\000\000\000\000'
            printf '%s' "$4"
        fi
    } >"corpus/ws_handshake/$1"
}
up=$'GET / HTTP/1.1\r\nHost: 127.0.0.1:7777\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n'
ws_seed token 000 "$up"$'Authorization: Bearer fuzz-token-0123456789abcdef\r\n\r\n'
ws_seed token-frame 014 "$up"$'Authorization: Bearer fuzz-token-0123456789abcdef\r\n\r\n' \
    '{"jsonrpc":"2.0","id":1,"method":"sandbox.list"}'
ws_seed lower-blanks 011 "$up"$'authorization: bearer \t fuzz-token-0123456789abcdef \r\n\r\n'
ws_seed no-token 000 "$up"$'\r\n'
ws_seed wrong-token 000 "$up"$'Authorization: Bearer fuzz-token-0123456789abcdeF\r\n\r\n'
ws_seed two-tokens 000 "$up"$'Authorization: Bearer fuzz-token-0123456789abcdef\r\nAuthorization: Bearer x\r\n\r\n'
ws_seed basic 000 "$up"$'Authorization: Basic fuzz-token-0123456789abcdef\r\n\r\n'
ws_seed junk-after 000 "$up"$'Authorization: Bearer fuzz-token-0123456789abcdef\r\n\r\nX'
ws_seed post 000 $'POST / HTTP/1.1\r\nAuthorization: Bearer fuzz-token-0123456789abcdef\r\n\r\n'

# mcp_upstream_reply: selector (read size, bit 4 a 64-byte response cap, bits 5-6 the call cap),
# then the upstream's stdout (an initialize result, two tools/list pages, tools/call results and
# an error) and, on lines starting with `>`, the program's call_tool params.
U=mcp_upstream_reply
init='{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"weather","version":"1"}}}'
page1='{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"forecast","description":"Weather forecast.\nSecond line","inputSchema":{"type":"object","properties":{"city":{"type":"string","description":"City"},"days":{"type":"integer","default":1},"units":{"enum":["c","f"]}},"required":["city"]},"outputSchema":{"type":"object","properties":{"result":{"type":"number"}},"required":["result"],"x-fastmcp-wrap-result":true}},{"name":"get-weather","description":"\"\"\"\n__import__(\"os\")","inputSchema":{"type":"object","properties":{"class":{"type":"string"},"a b":{"type":"array","items":{"type":"number"}}}}}],"nextCursor":"p2"}}'
page2='{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"search","inputSchema":{"type":"object","properties":{"q":{"type":["string","null"],"default":"x"},"n":{"anyOf":[{"type":"integer"},{"type":"null"}]},"mode":{"enum":[1,"two",null,true]}}}},{"name":"9lives","inputSchema":{"type":"object","properties":{"s":{"type":"string","pattern":"^(a+)+$"}}}}]}}'
wrapped='{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"21.5"}],"structuredContent":{"result":21.5}}}'
texts='{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"{\"t\": 3}"},{"type":"text","text":"sunny"},{"type":"image","data":"aGk=","mimeType":"image/png"}]}}'
failed='{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"no city","data":{"x":1}}}'
is_error='{"jsonrpc":"2.0","id":6,"result":{"content":[{"type":"text","text":"bad\u001b[2J"}],"isError":true}}'
calls='>{"tool":"up.forecast","args":{"city":"Paris","days":2}}
>{"tool":"up.get-weather","args":null}
>{"tool":"up.search","args":{"q":"x","mode":"two"}}
>{"tool":"up.9lives","args":{"s":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"}}
>{"tool":"up.nope\u001b","args":{}}
>{"tool":"up.forecast","args":{"days":"x"}}'
seed $U session 140 "$init"$'\n'"$page1"$'\n'"$page2"$'\n'"$wrapped"$'\n'"$texts"$'\n'"$failed"$'\n'"$is_error"$'\n'"$calls"$'\n'
seed $U small-cap 023 "$page2"$'\n'"$texts"$'\n''>{"tool":"up.search","args":{}}'$'\n'
seed $U endless 000 '{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","inputSchema":{}}],"nextCursor":"c"}}'$'\n'

# media_sniff: a real 1x1 PNG and JPEG (as matplotlib and Pillow write them), and a PNG's
# signature going on as HTML (what must not pass as an image).
mkdir -p corpus/media_sniff
if command -v python3 >/dev/null; then
    python3 - <<'PY'
import struct, zlib
def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))
open("corpus/media_sniff/png", "wb").write(png)
open("corpus/media_sniff/png-then-html", "wb").write(png[:8] + b"<html><script>alert(1)</script>")
try:
    import io
    from PIL import Image
    out = io.BytesIO()
    Image.new("RGB", (1, 1)).save(out, "JPEG")
    open("corpus/media_sniff/jpeg", "wb").write(out.getvalue())
except ImportError:
    pass
PY
fi

# tokens_file: a tenants file as `airlock token add` writes it; a comment-only one.
seed tokens_file two "" "# airlock tenants
alice sha256:$(printf '%064d' 0) 1796400000
team-b sha256:$(printf 'ab%.0s' $(seq 32)) 1796400001
"
seed tokens_file comment "" "# nothing yet
"
# proxy_rewrite: requests toward an exposed port carrying the fuzz server token
# ("fuzz-server-token-0123456789") in the forms a client might, and a clean one.
tok=fuzz-server-token-0123456789
seed proxy_rewrite clean "" $'GET /x/0123456789abcdef0123456789abcdef01234567/app?q=1 HTTP/1.1\r\nHost: h\r\nX-Keep: 1\r\n\r\n'
seed proxy_rewrite bearer-tab "" $'GET /x/0123456789abcdef0123456789abcdef01234567/ HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer\t'"$tok"$'\r\n\r\n'
seed proxy_rewrite basic "" $'GET /x/0123456789abcdef0123456789abcdef01234567/ HTTP/1.1\r\nHost: h\r\nAuthorization: Basic '"$(printf 'x:%s' "$tok" | base64 -w0)"$'\r\nCookie: a=1; t='"$tok"$'\r\nProxy-Authorization: Bearer x\r\n\r\n'
seed proxy_rewrite query "" $'POST /x/0123456789abcdef0123456789abcdef01234567/?t=fuzz%2Dserver-token-0123456789 HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n'
# trace_meta: params carrying a W3C trace context (docs/server.md "Traces"), and a bad one.
seed trace_meta meta "" '{"sandbox_id":"sb-1","_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"a=b"}}'
seed trace_meta bad "" '{"_meta":{"traceparent":"ff-00000000000000000000000000000000-0000000000000000-00"}}'


# kernel_image_header: a header as the broker writes it (magic, u64 length, JSON): anonymous,
# file, special and stack regions.
mkdir -p corpus/kernel_image_header
python3 - >corpus/kernel_image_header/regions <<'PY'
import json, struct, sys
r = lambda s, e, p, k, f: {"start": s, "end": e, "prot": p, "kind": k, "fill": f}
h = {"regions": [r(4096, 8192, 3, {"type": "anon"}, True),
                 r(8192, 12288, 5, {"type": "file", "path": "/usr/lib/x.so", "offset": 0,
                                    "size": 10, "mtime": [1, 2], "shared": False}, False),
                 r(12288, 16384, 1, {"type": "special", "name": "[vdso]"}, False),
                 r(16384, 20480, 3, {"type": "stack"}, True)],
     "registers": [0] * 18, "fs_base": 0, "layout": [0] * 11, "sigactions": [[2, 1, 0, 0, 0]],
     "sigmask": 0, "rseq": [4096, 32], "cwd": "/work"}
b = json.dumps(h).encode()
sys.stdout.buffer.write(b"AIRLOCK-IMAGE/1\n" + struct.pack("<Q", len(b)) + b)
PY
