"""The fenced code blocks of a Markdown file, with the doc-test marker each may carry.

A marker is an HTML comment on the last non-blank line before the block's fence:
  <!-- doc-test: skip (REASON) -->   not run; the reason is printed with the results
  <!-- doc-test: output -->          a text block: lines the previous run block printed, in order
  <!-- doc-test: maf-python -->      a python block run with Python >= 3.12 and maf-sandbox
Every block carries a language: sh/bash (run), python (run), text (not run), toml and json
(parsed). An unlabelled block or another language is an error, so a new block is run by default.
"""
from __future__ import annotations

import dataclasses
import pathlib
import re
from typing import List, Optional

FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
SKIP = re.compile(r"^skip \((.+)\)$")
RUN = {"sh", "bash", "python"}
LANGUAGES = RUN | {"text", "toml", "json"}


@dataclasses.dataclass(frozen=True)
class Block:
    path: pathlib.Path
    line: int             # the opening fence's line, 1-based
    lang: str
    code: str
    marker: Optional[str]

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"

    @property
    def skip_reason(self) -> Optional[str]:
        m = SKIP.match(self.marker or "")
        return m.group(1) if m else None


class DocError(Exception):
    """A block the doc test cannot classify (no language, an unknown one, an unknown marker)."""


def dedent(lines: List[str], indent: str) -> str:
    return "\n".join(line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines) + "\n"


def check(block: Block) -> Block:
    if block.lang not in LANGUAGES:
        raise DocError(f"{block.where}: a block needs a language, one of {sorted(LANGUAGES)} "
                       f"(got {block.lang!r}); use text for output and synopses")
    marker = block.marker
    if marker is not None and not (SKIP.match(marker) or marker in ("output", "maf-python")):
        raise DocError(f"{block.where}: unknown doc-test marker {marker!r}")
    if marker == "output" and block.lang != "text":
        raise DocError(f"{block.where}: an output marker goes on a text block")
    if marker == "maf-python" and block.lang != "python":
        raise DocError(f"{block.where}: a maf-python marker goes on a python block")
    return block


def blocks(path: pathlib.Path) -> List[Block]:
    lines = path.read_text().splitlines()
    out, i, last_text = [], 0, ""
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].strip():
                last_text = lines[i]
            i += 1
            continue
        start, indent, lang = i, m.group(1), m.group(2)
        i += 1
        while i < len(lines) and not re.match(rf"^{re.escape(indent)}```\s*$", lines[i]):
            i += 1
        if i == len(lines):
            raise DocError(f"{path.name}:{start + 1}: the block is never closed")
        marker = MARKER.match(last_text)
        out.append(check(Block(path, start + 1, lang, dedent(lines[start + 1:i], indent),
                               marker.group(1) if marker else None)))
        last_text = ""
        i += 1
    return out
