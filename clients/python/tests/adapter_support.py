"""Shared by the adapter tests: a program that writes a small PNG in the sandbox, a check that
bytes are that PNG, and running an example."""
import os
import pathlib
import struct
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE.parent / "src"
EXAMPLES = HERE.parents[2] / "examples"

#: Python run in the sandbox: writes notes.txt and a 4x3 red PNG, chart.png.
WRITE_NOTES_AND_PNG = r'''
import struct, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
rows = b"".join(b"\x00" + bytes([255, 0, 0] * 4) for _ in range(3))
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 3, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
open("chart.png", "wb").write(png)
open("notes.txt", "w").write("the answer is 42\n")
print("saved", len(png))
'''


def png_size(data: bytes):
    """(width, height) of a PNG, asserting it is one."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n"), data[:16]
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def run_example(name, airlock_bin):
    """Run examples/NAME offline (no OPENAI_API_KEY) against `airlock serve --stdio`; its stdout."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "AIRLOCK_URL")}
    env.update(AIRLOCK_BIN=airlock_bin, PYTHONPATH=str(SRC), RUST_LOG="warn")
    r = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout
