"""Guest paths: maf-sandbox's working-directory rules over airlock's one file plane.

airlock's files API addresses the sandbox's `/work` (its bounded tmpfs) and nothing else, with
paths relative to it, and resolves every one beneath the work dir's handle without following a
link (`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`): a guest that swaps a component for a
link between a check and the operation makes the operation fail, never land elsewhere. So the
reach rule holds by construction, and the checks here (maf-sandbox's own `paths` bundle, fed
with airlock's no-follow stat) exist to name each refusal the way the protocol asks: a link on
the path is a `ValueError`, a regular file where a directory was expected a
`NotADirectoryError`.
"""
from __future__ import annotations

import posixpath

from maf_sandbox import EntryKind, SandboxEntry
from maf_sandbox.paths import resolve_guest_working_directory

#: The guest's work dir: the root of airlock's file plane.
WORK = "/work"


def working_directory(directory: str, base: str) -> str:
    """An absolute guest working directory: relative ones confined to `base`, absolute kept."""
    resolved = resolve_guest_working_directory(directory, base)
    return posixpath.normpath(resolved)


def wire_path(guest_path: str) -> str | None:
    """`guest_path` relative to `/work` ("" for `/work` itself), or None when outside it."""
    path = posixpath.normpath(guest_path)
    if path == WORK:
        return ""
    if path.startswith(WORK + "/"):
        return path[len(WORK) + 1:]
    return None


def fixed_entry(guest_path: str) -> SandboxEntry | None:
    """What sits above the file plane: `/` and `/work` are directories the guest cannot replace
    (a read-only root, and the tmpfs mounted on it); anything else up there is no answer."""
    path = posixpath.normpath(guest_path)
    if path in ("/", WORK):
        return SandboxEntry(path=path, kind=EntryKind.DIRECTORY, size_bytes=None)
    return None


def outside_the_plane(guest_path: str) -> PermissionError:
    return PermissionError(
        f"{guest_path!r} is outside /work, the only part of an airlock sandbox its file plane "
        "reaches (the rest of the guest's root is read-only system directories)"
    )


def storage_base(work_dir: str | None) -> str:
    """The spec's storage base, honoured exactly, or refused when airlock cannot honour it."""
    if work_dir is None:
        return WORK
    base = posixpath.normpath(work_dir)
    if not work_dir.startswith("/") or "\0" in work_dir or wire_path(base) is None:
        raise ValueError(
            f"work_dir {work_dir!r} cannot be honoured: an airlock sandbox's writable storage is "
            f"{WORK} (one bounded tmpfs; the rest of its root is read-only). Use work_dir=None "
            f"or a directory under {WORK}"
        )
    return base


def kind_of(wire: str | None, exists: bool, is_dir: bool, size: int | None) -> EntryKind:
    """The entry kind airlock reports (`kind`), or, from a broker too old to say, the kind
    its other fields imply, failing closed to OTHER (never read, never traversed)."""
    named = {"file": EntryKind.FILE, "dir": EntryKind.DIRECTORY, "symlink": EntryKind.SYMLINK,
             "other": EntryKind.OTHER}
    if wire in named:
        return named[wire]
    if is_dir:
        return EntryKind.DIRECTORY
    if exists and size is not None:
        return EntryKind.FILE
    return EntryKind.OTHER
