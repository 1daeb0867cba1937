#!/usr/bin/env python3
"""Count file-level import circles inside each Rust crate under crates/.

File A -> file B when A names an item of B through a path: a `use` (groups included) or a
qualified path in code (`crate::x::Y`, `super::Y`, `self::x::Y`, `child::Y`, or a name a
`use` bound to a module). A path goes to the file of the deepest module it names, so
`crate::run::prepare::X` -> run/prepare.rs and `crate::run::X` -> run/mod.rs (whether run/
defines X or re-exports it). `mod x;` alone is no arrow; a file's inline modules (`mod tests
{ use super::*; }`) belong to that file. Only src/ is read (each crate root: lib.rs, main.rs,
src/bin/*). A circle is a strongly connected component of two files or more.

Usage: python3 scripts/import-circles.py [--list] [crates-dir]
  --list  also print every arrow of every crate
Exit status: 1 when there is a circle, 0 otherwise.
"""
import re
import sys
from collections import defaultdict
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
MOD_DECL = re.compile(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;")
INLINE_MOD = re.compile(r"\bmod\s+(" + IDENT + r")\s*\{|[{}]")
USE_STMT = re.compile(r"(?<![\w$])use\s+([^;]+);")
RAW_STRING = re.compile(r'b?r(#*)"')
CODE_PATH = re.compile(r"(?<![\w:$])((?:crate|super|self|[a-z_][a-z0-9_]*)(?:\s*::\s*" + IDENT + r")+)")


def strip(src):
    """Blank comments, string and char literals (offsets kept) so only code is scanned."""
    out, i, n = list(src), 0, len(src)

    def blank(a, b):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                depth += src.startswith("/*", j) - src.startswith("*/", j)
                j += 2 if src.startswith(("/*", "*/"), j) else 1
            blank(i, j)
            i = j
        elif (m := RAW_STRING.match(src, i)) and (i == 0 or not re.match(r"\w", src[i - 1])):
            end = src.find('"' + m.group(1), m.end())
            end = n if end < 0 else end + 1 + len(m.group(1))
            blank(i, end)
            i = end
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'" and (src[i + 1:i + 2] == "\\" or src[i + 2:i + 3] == "'"):
            j = src.find("'", i + 2 + (src[i + 1] == "\\"))
            blank(i, j + 1)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def use_paths(tree):
    """Flatten a use tree (`crate::{a::X, b::{self, Y as Z}}`) into (segments, bound name)."""
    tree = re.sub(r"\s+", " ", re.sub(r"\s*(::|,|\{|\})\s*", r"\1", tree.strip()))
    flat = []
    for segs, alias in use_leaves(tree):
        if segs and segs[-1] == "self":  # `a::{self}` binds `a`
            segs.pop()
        if segs:
            flat.append((segs, alias or segs[-1]))
    return flat


def use_leaves(tree):
    """(segments, alias or "") of every leaf of a whitespace-normalised use tree."""
    brace = tree.find("{")
    if brace < 0:
        path, _, alias = tree.partition(" as ")
        return [([s for s in path.split("::") if s], alias)]
    prefix = [s for s in tree[:brace].split("::") if s]
    inner, depth, start, parts = tree[brace + 1:tree.rfind("}")], 0, 0, []
    for k, ch in enumerate(inner + ","):
        depth += (ch == "{") - (ch == "}")
        if ch == "," and depth == 0:
            parts.append(inner[start:k])
            start = k + 1
    return [(prefix + segs, alias) for p in parts if p.strip() for segs, alias in use_leaves(p)]


class Crate:
    """One crate root's module tree: module path (tuple) -> file, and the arrows between files."""

    def __init__(self, root):
        self.files, self.modules, self.children = {}, {}, defaultdict(set)
        self.load(root, (), root.parent)

    def load(self, path, mod, child_dir):
        """Read one file and, through its `mod x;` lines, the files of its child modules."""
        code = strip(path.read_text())
        spans = inline_spans(code)
        self.files[path] = (mod, code, spans)
        self.modules[mod] = path
        for m in MOD_DECL.finditer(code):
            attrs, name = m.groups()
            if inline_chain(spans, m.start()):
                continue
            self.children[mod].add(name)
            if attr := re.search(r'#\[path\s*=\s*"([^"]+)"\]', attrs):
                self.load(path.parent / attr.group(1), mod + (name,), path.parent / name)
            elif (child := child_dir / f"{name}.rs").exists():
                self.load(child, mod + (name,), child_dir / name)
            elif (child := child_dir / name / "mod.rs").exists():
                self.load(child, mod + (name,), child_dir / name)

    def resolve(self, here, segs, aliases):
        """(deepest module named, the rest) for a path written in module `here`; None if foreign."""
        base, rest = here, list(segs)
        if rest[0] == "crate":
            base, rest = (), rest[1:]
        elif rest[0] in ("self", "super"):
            while rest and rest[0] in ("self", "super"):
                base = base[:-1] if rest.pop(0) == "super" else base
        elif rest[0] in aliases:
            base, rest = aliases[rest[0]], rest[1:]
        elif rest[0] in self.children[here]:
            base, rest = here + (rest[0],), rest[1:]
        else:
            return None
        full = base + tuple(rest)
        mod = max((full[:k] for k in range(len(full) + 1) if full[:k] in self.modules), key=len)
        return mod, full[len(mod):]

    def arrows(self):
        """{(file, target file): names} from every `use` and code path of every file."""
        found = defaultdict(set)
        for path, (mod, code, spans) in self.files.items():
            aliases = {}
            for m in USE_STMT.finditer(code):
                here = mod + inline_chain(spans, m.start())
                for segs, name in use_paths(m.group(1)):
                    hit = self.resolve(here, segs, aliases)
                    if hit and hit[1]:
                        found[path, self.modules[hit[0]]].add(hit[1][0])
                    elif hit:
                        aliases[name] = hit[0]  # a module brought into scope: its uses count
            for m in CODE_PATH.finditer(USE_STMT.sub(lambda u: " " * len(u.group(0)), code)):
                segs = re.sub(r"\s+", "", m.group(1)).split("::")
                hit = self.resolve(mod + inline_chain(spans, m.start()), segs, aliases)
                if hit and hit[1]:
                    found[path, self.modules[hit[0]]].add(hit[1][0])
        return {k: v for k, v in found.items() if k[0] != k[1]}


def inline_spans(code):
    """(start, end, name) of every inline `mod name { ... }` block of a file."""
    spans, stack = [], []
    for m in INLINE_MOD.finditer(code):
        if m.group(1) or m.group(0) == "{":
            stack.append((m.start(), m.group(1)))
        elif stack:
            start, name = stack.pop()
            if name:
                spans.append((start, m.end(), name))
    return sorted(spans)


def inline_chain(spans, pos):
    """The names of the inline modules around `pos`, outermost first."""
    return tuple(name for start, end, name in spans if start <= pos < end)


def circles(edges):
    """Strongly connected components (Tarjan) of two nodes or more."""
    graph, index, low, stack, on, out = defaultdict(set), {}, {}, [], set(), []
    for a, b in edges:
        graph[a].add(b)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
                on.discard(comp[-1])
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def crate_roots(src):
    """The crate roots of one package: the library, the binary, every src/bin target."""
    yield from (p for p in (src / "lib.rs", src / "main.rs") if p.exists())
    yield from sorted((src / "bin").glob("*.rs"))
    yield from sorted((src / "bin").glob("*/main.rs"))


def main(argv):
    listing = "--list" in argv
    args = [a for a in argv if not a.startswith("--")]
    crates_dir = Path(args[0] if args else Path(__file__).resolve().parent.parent / "crates")
    total = 0
    for package in sorted(p for p in crates_dir.iterdir() if (p / "src").is_dir()):
        edges = {}
        for root in crate_roots(package / "src"):
            edges.update(Crate(root).arrows())

        def rel(path):
            return path.relative_to(crates_dir).as_posix()

        if listing:
            for (a, b), names in sorted(edges.items()):
                print(f"  {rel(a)} -> {rel(b)}: {', '.join(sorted(names))}")
        for comp in circles(edges):
            total += 1
            print(f"circle {total}: {' <-> '.join(rel(f) for f in comp)}")
            for (a, b), names in sorted(edges.items()):
                if a in comp and b in comp:
                    print(f"    {rel(a)} -> {rel(b)}: {', '.join(sorted(names))}")
    print(f"{total} import circle(s)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
