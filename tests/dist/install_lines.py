"""The `pip install` lines README.md and docs/*.md give a user: found in fenced code blocks and in
inline code, one line per command (`a && pip install b` gives `pip install b`; `cd DIR && pip
install .` keeps DIR as the line's working directory), comments and shell quoting removed."""
from __future__ import annotations

import dataclasses
import pathlib
import re
import shlex
from typing import Iterator, List

FENCE = re.compile(r"^\s*```")
INLINE = re.compile(r"`([^`\n]+)`")


@dataclasses.dataclass(frozen=True)
class InstallLine:
    where: str            # file:line, for messages
    text: str             # the command as written
    args: List[str]       # what follows `pip install`
    cwd: str              # relative to the repository ("." unless the line cd's first)

    def __str__(self) -> str:
        return f"{self.where}: {self.text}"


def docs(repo: pathlib.Path) -> List[pathlib.Path]:
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


def code_on_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, code) for every line of a fenced block and every inline code span."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            yield number, line
        else:
            for span in INLINE.findall(line):
                yield number, span


def commands(code: str) -> List[str]:
    """`code` without its comment, split at `&&`, `;` and `|`."""
    try:
        words = shlex.split(code, comments=True, posix=True)
    except ValueError:
        return []
    out, current = [], []
    for word in words:
        if word in ("&&", ";", "||", "|"):
            out.append(current)
            current = []
        else:
            current.append(word)
    out.append(current)
    return [shlex.join(c) for c in out if c]


def parse(where: str, code: str) -> Iterator[InstallLine]:
    cwd = "."
    for command in commands(code):
        words = shlex.split(command)
        if words[:1] == ["cd"] and len(words) == 2:
            cwd = words[1]
            continue
        for start in range(len(words) - 1):
            if words[start].endswith("pip") and words[start + 1] == "install":
                args = words[start + 2:]
                if args:  # "`pip install` the wheel" is prose, not a command
                    yield InstallLine(where, command, args, cwd)
                break


def install_lines(repo: pathlib.Path) -> List[InstallLine]:
    found = []
    for doc in docs(repo):
        for number, code in code_on_lines(doc.read_text()):
            if "pip install" in code:
                found += parse(f"{doc.relative_to(repo)}:{number}", code)
    return found
