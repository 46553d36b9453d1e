"""A unified diff, parsed: files, hunks, and which new-side lines a review comment may anchor to.

`parse_diff(text)` reads the output of `git diff --no-color -M` (any number of files) into
`FilePatch` values. GitHub accepts an inline review comment on the RIGHT side only at a line
the file's patch shows (an added line or a context line), and a multi-line comment only when
`start_line < line` and both lie in the same hunk; `anchor_for` applies exactly those rules,
so a review built from its answers is never refused with a 422 for its anchors.

The parser is total: lines it does not understand are ignored, never raised on, because the
text comes from a repository a stranger may control (a file name with a newline, a binary file,
a mode change without content).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_DIFF_GIT = re.compile(r"^diff --git (?:\"?a/)(.*?)\"? (?:\"?b/)(.*?)\"?$")


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


def _unquote(path: str) -> str:
    if path.startswith('"') and path.endswith('"'):
        path = path[1:-1]
    return path


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
            match = _DIFF_GIT.match(line)
            old, new = (match.group(1), match.group(2)) if match else ("", "")
            current = _FileBuilder(_unquote(old), _unquote(new))
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
        if line.startswith("new file mode"):
            current.status = "added"
        elif line.startswith("deleted file mode"):
            current.status = "removed"
        elif line.startswith("rename from "):
            current.old_path = line[len("rename from ") :]
            current.status = "renamed"
        elif line.startswith("rename to "):
            current.path = line[len("rename to ") :]
        elif line.startswith("Binary files ") or line == "GIT binary patch":
            current.binary = True
        elif line.startswith("+++ ") and line[4:] != "/dev/null":
            current.path = _unquote(line[4:]).removeprefix("b/")
        elif line.startswith("--- ") and line[4:] != "/dev/null":
            current.old_path = _unquote(line[4:]).removeprefix("a/")
    if current is not None:
        files.append(current.build())
    return files


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
