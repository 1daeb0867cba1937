"""A sandbox's files (`files.*`): paths relative to /work; files larger than one 512 KiB call
move in chunks transparently (`offset`/`length`)."""
from __future__ import annotations

import base64
from typing import Any, Dict, List, Mapping, Optional, Union

from ._session import Session
from .errors import ProtocolError
from .models import FileEntry, FileStat

#: Most bytes one `files.read` or `files.write` carries.
CHUNK_BYTES = 512 * 1024


class Files:
    def __init__(self, session: Session, sandbox_id: str) -> None:
        self._session = session
        self._sandbox_id = sandbox_id

    async def _call(self, method: str, **params: Any) -> Dict[str, Any]:
        result = await self._session.request(method, {"sandbox_id": self._sandbox_id, **params})
        if not isinstance(result, dict):
            raise ProtocolError(f"{method} answered {result!r}, not an object")
        return result

    async def write(self, path: str, data: Union[bytes, str], *, encoding: str = "utf-8") -> FileStat:
        """Create or replace `path` (missing parents are created) with `data` (a str is encoded).
        Larger than 512 KiB: the first chunk replaces the file, the rest are appended. Returns
        the file as `stat` would describe it (`kind` "file")."""
        blob = data.encode(encoding) if isinstance(data, str) else bytes(data)
        r: Dict[str, Any] = {}
        for offset in range(0, max(len(blob), 1), CHUNK_BYTES):
            chunk = blob[offset:offset + CHUNK_BYTES]
            r = await self._call("files.write", path=path, data=base64.b64encode(chunk).decode(), offset=offset)
        return FileStat.from_wire({"exists": True, "is_dir": False, "path": path, **r})

    async def read(self, path: str) -> bytes:
        """The whole file, read in 512 KiB chunks until end of file."""
        parts: List[bytes] = []
        offset = 0
        while True:
            r = await self._call("files.read", path=path, offset=offset, length=CHUNK_BYTES)
            data = base64.b64decode(str(r.get("data", "")))
            parts.append(data)
            offset += len(data)
            if r.get("eof", True) or not data:
                return b"".join(parts)

    async def read_text(self, path: str, *, encoding: str = "utf-8") -> str:
        """The whole file, decoded."""
        return (await self.read(path)).decode(encoding)

    async def list(self, path: Optional[str] = None) -> List[FileEntry]:
        """The sorted entries of a directory (`/work` itself by default)."""
        r = await self._call("files.list", **({} if path is None else {"path": path}))
        return [FileEntry.from_wire(e) for e in r.get("entries") or []]

    async def stat(self, path: str) -> FileStat:
        """Whether `path` exists, its size (None for what `read` would refuse) and kind."""
        return FileStat.from_wire(await self._call("files.stat", path=path))

    async def exists(self, path: str) -> bool:
        return (await self.stat(path)).exists

    async def remove(self, path: str) -> None:
        """Remove a file, link (never followed) or empty directory; a missing path is fine."""
        await self._call("files.remove", path=path)

    async def write_many(self, files: Mapping[str, Union[bytes, str]], *, encoding: str = "utf-8") -> List[FileStat]:
        """Write several files in one call (`files.write_many`; missing parents are created),
        at most 512 KiB in all; returns each as `stat` describes it. The first refused ends the
        call (those before it are written)."""
        wire = [{"path": p, "data": base64.b64encode(d.encode(encoding) if isinstance(d, str) else bytes(d)).decode()}
                for p, d in files.items()]
        r = await self._call("files.write_many", files=wire)
        return [FileStat.from_wire(f) for f in r.get("files") or []]

    async def make_dir(self, path: str, *, parents: bool = False) -> bool:
        """Make the directory `path` (each missing parent too with `parents`); False when a
        directory was already there. A link on the way is refused (`FileRefusedError`)."""
        return bool((await self._call("files.make_dir", path=path, parents=parents)).get("created"))

    async def rename(self, src: str, dst: str) -> FileStat:
        """Rename `src` to `dst` (a file at `dst` is replaced; a link is moved, never
        followed); returns `dst` as `stat` describes it."""
        return FileStat.from_wire(await self._call("files.rename", **{"from": src, "to": dst}))
