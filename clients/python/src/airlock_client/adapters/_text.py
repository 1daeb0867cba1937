"""What an adapter shows a model: a run's output once, and what kind of file a blob is."""
from __future__ import annotations

from typing import Optional

from ..result import RunResult

#: Most characters of tool output a model is shown by default.
DEFAULT_MAX_CHARS = 20_000


def clip(text: str, max_chars: int) -> str:
    """`text`, cut to `max_chars` with a note saying how much was left out."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n[... {len(text) - max_chars} more characters not shown]"


def _why(result: RunResult) -> str:
    """Why a run did not complete, unless the output already says it (a traceback's last line)."""
    message = result.error.message if result.error is not None else ""
    if message and message not in result.stderr:
        return f": {message}"
    return f": exit status {result.exit_code}" if result.exit_code is not None else ""


def describe_run(result: RunResult, *, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The run for a model, each stream once: stdout, then stderr under a heading, then how
    the run ended when it did not complete."""
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("stderr:\n" + result.stderr.rstrip("\n"))
    if result.stdout_truncated or result.stderr_truncated:
        parts.append(f"[output cut at the sandbox's cap: {result.stdout_bytes} bytes of stdout, "
                     f"{result.stderr_bytes} of stderr were produced]")
    if not result.ok:
        parts.append(f"[{result.status.value}{_why(result)}]")
    return clip("\n".join(parts), max_chars) if parts else "(no output)"


_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_media_type(data: bytes) -> Optional[str]:
    """The image type of `data` by its magic bytes (PNG, JPEG, GIF, WebP), or None."""
    for magic, media_type in _MAGIC:
        if data.startswith(magic):
            return media_type
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def as_text(data: bytes) -> Optional[str]:
    """`data` decoded as UTF-8 when it is text (no NUL), else None."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
