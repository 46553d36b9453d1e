"""A unified diff, parsed: files, hunks, and which new-side lines a review comment may anchor to.

`parse_raw_diff(text)` reads the output of `git diff-tree -r -z --raw -p --no-abbrev -M`
into `FilePatch` values: the names, modes and object ids come from the NUL-separated raw
records, which hold every name exactly as it is, and the hunks from the patch that follows.
`parse_diff(text)` reads a patch alone; there a name git had to quote (`"caf\\303\\251.py"`,
anything with a tab, a quote, a backslash or a newline) is C-unquoted, and the tab git writes
after a `+++`/`---` name that contains a space is dropped, so both name a file the way GitHub
does.

GitHub accepts an inline review comment on the RIGHT side only at a line the file's patch
shows (an added line or a context line), and a multi-line comment only when
`start_line < line` and both lie in the same hunk; `anchor_for` applies exactly those rules,
so a review built from its answers is never refused with a 422 for its anchors.

The parser is total: lines it does not understand are ignored, never raised on, because the
text comes from a repository a stranger may control (a file name with a newline, a binary file,
a mode change without content).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_INDEX = re.compile(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)(?: (\d{6}))?$")
_RAW = re.compile(r"^:(\d{6}) (\d{6}) ([0-9a-f]+) ([0-9a-f]+) ([A-Z])(\d*)$")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
SUBMODULE_MODE = "160000"
SYMLINK_MODE = "120000"
_STATUS = {"A": "added", "D": "removed", "R": "renamed", "C": "copied"}


@dataclass(frozen=True, slots=True)
class Hunk:
    """One `@@` hunk: its header numbers and the new-side lines it shows (added or context)."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    added: frozenset[int]
    shown: frozenset[int]
    text: str

    def contains(self, line: int) -> bool:
        return line in self.shown


@dataclass(frozen=True, slots=True)
class FilePatch:
    """One file's part of a diff."""

    path: str
    old_path: str | None
    status: str  # added | removed | modified | renamed
    binary: bool
    additions: int
    deletions: int
    hunks: tuple[Hunk, ...]
    code: str = ""
    """git's status letter (A, C, D, M, R, T), when the raw records said it."""
    old_mode: str = ""
    new_mode: str = ""
    old_oid: str = ""
    new_oid: str = ""

    @property
    def submodule(self) -> bool:
        """Whether either side is a submodule pointer (a gitlink), not a file."""
        return SUBMODULE_MODE in (self.old_mode, self.new_mode)

    @property
    def symlink(self) -> bool:
        """Whether either side is a symbolic link."""
        return SYMLINK_MODE in (self.old_mode, self.new_mode)

    def added_text(self) -> str:
        """The added lines' text, one line each (what a credential scan reads)."""
        return "\n".join(
            line[1:]
            for hunk in self.hunks
            for line in hunk.text.split("\n")[1:]
            if line.startswith("+")
        )

    @property
    def patch(self) -> str:
        """The hunks as GitHub's `patch` field shows them (no file header)."""
        return "\n".join(h.text for h in self.hunks)

    @property
    def changed(self) -> int:
        return self.additions + self.deletions

    def hunk_at(self, line: int) -> Hunk | None:
        for hunk in self.hunks:
            if hunk.contains(line):
                return hunk
        return None

    def added_lines(self) -> frozenset[int]:
        out: set[int] = set()
        for hunk in self.hunks:
            out |= hunk.added
        return frozenset(out)


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where an inline comment goes: `line`, and `start_line` for a range (None for one line)."""

    path: str
    line: int
    start_line: int | None = None


def _quoted(text: str, start: int = 0) -> tuple[str, int] | None:
    """The C-quoted name git wrote at `text[start]` (a `"`) and the index after its closing
    quote, or None when it is not one. Octal escapes are bytes of the UTF-8 name."""
    if not text.startswith('"', start):
        return None
    out = bytearray()
    i = start + 1
    while i < len(text):
        char = text[i]
        if char == '"':
            return out.decode("utf-8", "replace"), i + 1
        if char != "\\" or i + 1 >= len(text):
            out += char.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = text[i + 1]
        octal = text[i + 1 : i + 4]
        if len(octal) == 3 and all(c in "01234567" for c in octal):
            out.append(int(octal, 8) & 0xFF)
            i += 4
        elif nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        else:  # not an escape git writes: keep it as it stands
            out += ("\\" + nxt).encode("utf-8", "surrogateescape")
            i += 2
    return None


def unquote_path(text: str) -> str:
    """A name as git writes it in a patch header: C-unquoted when git quoted it whole."""
    found = _quoted(text)
    return found[0] if found is not None and found[1] == len(text) else text


def _header_path(text: str, prefix: str) -> str:
    """The name of a `--- a/...` or `+++ b/...` line: unquoted, without git's trailing tab."""
    found = _quoted(text)
    name = found[0] if found is not None else text.removesuffix("\t")
    return name.removeprefix(prefix)


def _git_header(rest: str) -> tuple[str, str]:
    """The two names of `diff --git a/<old> b/<new>` (an unquoted pair with spaces is split
    where both halves name the same file, as git itself reads it)."""
    first = _quoted(rest)
    if first is not None:
        old, end = first
        tail = rest[end:].removeprefix(" ")
        second = _quoted(tail)
        new = second[0] if second is not None else tail
        return old.removeprefix("a/"), new.removeprefix("b/")
    half = (len(rest) - 5) // 2
    name = rest[2 : 2 + half]
    if rest == f"a/{name} b/{name}":
        return name, name
    quote = rest.find(' "')
    second = _quoted(rest, quote + 1) if quote >= 0 else None
    if second is not None and second[1] == len(rest):
        return rest[:quote].removeprefix("a/"), second[0].removeprefix("b/")
    old, _, new = rest.partition(" b/")
    return old.removeprefix("a/"), new


class _HunkReader:
    """Reads one hunk's body line by line, exactly as many lines as its header counts."""

    def __init__(self, header: re.Match[str]) -> None:
        self.header = header
        self.old_start = int(header.group(1))
        self.old_count = int(header.group(2)) if header.group(2) is not None else 1
        self.new_start = int(header.group(3))
        self.new_count = int(header.group(4)) if header.group(4) is not None else 1
        self.old_left = self.old_count
        self.new_left = self.new_count
        self.new = self.new_start
        self.added: set[int] = set()
        self.shown: set[int] = set()
        self.lines: list[str] = [header.string]
        self.additions = 0
        self.deletions = 0

    @property
    def done(self) -> bool:
        return self.old_left <= 0 and self.new_left <= 0

    def feed(self, line: str) -> None:
        if line.startswith("\\"):  # "\ No newline at end of file"
            self.lines.append(line)
            return
        if line.startswith("+"):
            self.added.add(self.new)
            self.shown.add(self.new)
            self.new += 1
            self.new_left -= 1
            self.additions += 1
        elif line.startswith("-"):
            self.old_left -= 1
            self.deletions += 1
        else:  # a context line (" text", or "" where a tool dropped the space)
            self.shown.add(self.new)
            self.new += 1
            self.new_left -= 1
            self.old_left -= 1
        self.lines.append(line)

    def hunk(self) -> Hunk:
        return Hunk(
            self.old_start,
            self.old_count,
            self.new_start,
            self.new_count,
            frozenset(self.added),
            frozenset(self.shown),
            "\n".join(self.lines),
        )


class _FileBuilder:
    def __init__(self, old: str, new: str) -> None:
        self.path = new
        self.old_path: str | None = old
        self.status = "modified"
        self.binary = False
        self.additions = 0
        self.deletions = 0
        self.hunks: list[Hunk] = []
        self.reader: _HunkReader | None = None
        self.old_mode = ""
        self.new_mode = ""
        self.old_oid = ""
        self.new_oid = ""

    def header(self, line: str) -> None:
        """One extended header line of git's (modes, index, renames, copies, binary)."""
        index = _INDEX.match(line)
        if index:
            self.old_oid, self.new_oid = index.group(1), index.group(2)
            if index.group(3):
                self.old_mode = self.new_mode = index.group(3)
        elif line.startswith("new file mode "):
            self.status = "added"
            self.new_mode = line.rsplit(" ", 1)[-1]
        elif line.startswith("deleted file mode "):
            self.status = "removed"
            self.old_mode = line.rsplit(" ", 1)[-1]
        elif line.startswith("old mode "):
            self.old_mode = line.rsplit(" ", 1)[-1]
        elif line.startswith("new mode "):
            self.new_mode = line.rsplit(" ", 1)[-1]
        elif line.startswith(("rename from ", "copy from ")):
            self.old_path = unquote_path(line.split(" ", 2)[2])
            self.status = "renamed" if line.startswith("rename") else "copied"
        elif line.startswith(("rename to ", "copy to ")):
            self.path = unquote_path(line.split(" ", 2)[2])
        elif line.startswith("Binary files ") or line == "GIT binary patch":
            self.binary = True
        elif line.startswith("+++ ") and line[4:] != "/dev/null":
            self.path = _header_path(line[4:], "b/")
        elif line.startswith("--- ") and line[4:] != "/dev/null":
            self.old_path = _header_path(line[4:], "a/")

    def close_hunk(self) -> None:
        if self.reader is not None:
            self.hunks.append(self.reader.hunk())
            self.additions += self.reader.additions
            self.deletions += self.reader.deletions
        self.reader = None

    def build(self) -> FilePatch:
        self.close_hunk()
        old = self.old_path
        if self.status == "modified" and old is not None and old != self.path:
            self.status = "renamed"
        return FilePatch(
            path=self.path,
            old_path=old if old != self.path else None,
            status=self.status,
            binary=self.binary,
            additions=self.additions,
            deletions=self.deletions,
            hunks=tuple(self.hunks),
            old_mode=self.old_mode,
            new_mode=self.new_mode,
            old_oid=self.old_oid,
            new_oid=self.new_oid,
        )


def parse_diff(text: str) -> list[FilePatch]:
    """Every file of a `git diff` output, in order."""
    files: list[FilePatch] = []
    current: _FileBuilder | None = None
    for line in text.split("\n"):
        reader = current.reader if current is not None else None
        if reader is not None and (not reader.done or line.startswith("\\")):
            reader.feed(line)
            continue
        if line.startswith("diff --git "):
            if current is not None:
                files.append(current.build())
            current = _FileBuilder(*_git_header(line[len("diff --git ") :]))
            continue
        if current is None:
            continue
        header = _HUNK.match(line)
        if header:
            current.close_hunk()
            current.reader = _HunkReader(header)
            continue
        if current.reader is not None:
            continue  # text after a finished hunk that is not a header: not part of any hunk
        current.header(line)
    if current is not None:
        files.append(current.build())
    return files


@dataclass(frozen=True, slots=True)
class RawEntry:
    """One record of `git diff --raw -z`: the names exactly as they are, modes and ids."""

    code: str
    old_mode: str
    new_mode: str
    old_oid: str
    new_oid: str
    path: str
    old_path: str | None = None

    @property
    def sections(self) -> int:
        """How many `diff --git` sections its patch has: git writes a change between a file,
        a link and a submodule as a deletion and a creation."""
        return 2 if self.code == "T" else 1


def parse_raw(text: str) -> tuple[list[RawEntry], str]:
    """The raw records at the start of `-z` output, and the text after them (the patch)."""
    entries: list[RawEntry] = []
    pos = 0
    while text.startswith(":", pos):
        end = text.find("\0", pos)
        meta = _RAW.match(text[pos:end]) if end >= 0 else None
        if meta is None:
            return entries, ""
        code = meta.group(5)
        names: list[str] = []
        cursor = end + 1
        for _ in range(2 if code in ("R", "C") else 1):
            stop = text.find("\0", cursor)
            if stop < 0:
                return entries, ""
            names.append(text[cursor:stop])
            cursor = stop + 1
        old_mode, new_mode, old_oid, new_oid = meta.group(1, 2, 3, 4)
        entries.append(
            RawEntry(
                code,
                old_mode,
                new_mode,
                old_oid,
                new_oid,
                names[-1],
                names[0] if len(names) == 2 else None,
            )
        )
        pos = cursor
    rest = text[pos:]
    return entries, rest.removeprefix("\0") if entries else rest


def _joined(entry: RawEntry, parts: Sequence[FilePatch]) -> FilePatch:
    """One change from its record and its patch sections (the new side's lines anchor)."""
    return FilePatch(
        path=entry.path,
        old_path=entry.old_path if entry.old_path != entry.path else None,
        status=_STATUS.get(entry.code, "modified"),
        binary=any(p.binary for p in parts),
        additions=sum(p.additions for p in parts),
        deletions=sum(p.deletions for p in parts),
        hunks=parts[-1].hunks if parts else (),
        code=entry.code,
        old_mode=entry.old_mode,
        new_mode=entry.new_mode,
        old_oid=entry.old_oid,
        new_oid=entry.new_oid,
    )


def raw_diff_args(context: int) -> tuple[str, ...]:
    """The `git diff-tree` arguments whose output `parse_raw_diff` reads, with `context` lines
    around each change.

    `diff-tree` compares two commits' trees and nothing else (no work tree, so no submodule is
    ever entered, and a submodule pointer's move shows up); the raw records (`-z`) name every
    file exactly, with its modes, and the patch after them gives the hunks. No external diff,
    text conversion or colour: what the repository configures never shapes what is parsed.
    """
    return (
        "diff-tree",
        "-r",
        "-z",
        "--raw",
        "-p",
        "--no-abbrev",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "-M",
        f"--unified={context}",
    )


def parse_raw_diff(text: str) -> list[FilePatch]:
    """Every change of `git diff-tree -r -z --raw -p` output (or of a patch alone), in order.

    The records and the patch sections come in the same order, so they are paired by
    position; should the counts ever differ, by the names the patch headers give.
    """
    entries, rest = parse_raw(text)
    sections = parse_diff(rest)
    if not entries:
        return sections
    if sum(e.sections for e in entries) == len(sections):
        out: list[FilePatch] = []
        at = 0
        for entry in entries:
            out.append(_joined(entry, sections[at : at + entry.sections]))
            at += entry.sections
        return out
    by_path: dict[str, list[FilePatch]] = {}
    for section in sections:
        by_path.setdefault(section.path, []).append(section)
    return [_joined(e, by_path.get(e.path, [])) for e in entries]


def anchor_for(patch: FilePatch, start: int, end: int | None = None) -> Anchor | None:
    """An anchor GitHub accepts for new-side lines `start`..`end`, or None when there is none.

    The range is narrowed to the part inside one hunk: the hunk that holds `end` (the line
    GitHub shows the comment at), else the one that holds `start`. A range whose lines are
    all outside the diff has no anchor; its finding belongs in the review body.
    """
    last = end if end is not None and end >= start else start
    for line in (last, start):
        hunk = patch.hunk_at(line)
        if hunk is None:
            continue
        lines = sorted(n for n in hunk.shown if start <= n <= last)
        if not lines:
            continue
        first, final = lines[0], lines[-1]
        return Anchor(patch.path, final, first if first < final else None)
    # The range spans a hunk without either end in it: anchor at its last shown line.
    for hunk in reversed(patch.hunks):
        inside = sorted(n for n in hunk.shown if start <= n <= last)
        if inside:
            first, final = inside[0], inside[-1]
            return Anchor(patch.path, final, first if first < final else None)
    return None


def anchor_valid(patch: FilePatch, anchor: Anchor) -> bool:
    """GitHub's rule for a RIGHT-side comment: `line` shown, `start_line` before it in its hunk."""
    hunk = patch.hunk_at(anchor.line)
    if hunk is None or anchor.path != patch.path:
        return False
    if anchor.start_line is None:
        return True
    return anchor.start_line < anchor.line and hunk.contains(anchor.start_line)


def changed_lines_overlap(patch: FilePatch, start: int, end: int) -> bool:
    """Whether any added line of the patch lies in `start`..`end` (new side)."""
    return any(start <= n <= end for n in patch.added_lines())
