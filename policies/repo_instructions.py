"""Repository instructions: which files steer the agents, how much of each, and where it applies.

The files are the ones maintainers already write for coding agents: `AGENTS.md`, `CLAUDE.md`,
`.github/copilot-instructions.md` (each for every file), and `.github/instructions/*.instructions.md`,
whose front matter `applyTo: "glob,glob"` says which files each one is about (a file without
`applyTo` applies nowhere, as Copilot reads it). `.github/bot.yml` adds `review.instructions`
(everywhere) and `review.path_instructions` (per glob). The caller reads the files at the pull
request's base commit (a pull request cannot rewrite its own reviewer's instructions), or at the
default branch's head for `fix`, `ask` and `triage`.

Caps: each piece at most `FILE_LIMIT` characters, all of them together at most `TOTAL_LIMIT`,
in the order `collect` receives them (the configuration first, then the files in the order of
`INSTRUCTION_FILES`, then the scoped files by name). What was cut, left out, or refused (a
symbolic link, a binary or huge file) is kept, so the summary can say it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from policies.review_plan import glob_match
from policies.untrusted_text import code_span

__all__ = [
    "FILE_LIMIT",
    "INSTRUCTION_FILES",
    "MAX_FILE_BYTES",
    "MAX_SCOPED_FILES",
    "SCOPED_DIR",
    "SCOPED_SUFFIX",
    "TOTAL_LIMIT",
    "Instruction",
    "InstructionSet",
    "Piece",
    "Refused",
    "collect",
    "content_problem",
    "split_front_matter",
]

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md")
SCOPED_DIR = ".github/instructions"
SCOPED_SUFFIX = ".instructions.md"
FILE_LIMIT = 4_000
TOTAL_LIMIT = 12_000
MIN_PIECE = 200  # a piece is cut to the room left only when at least this much remains
MAX_SCOPED_FILES = 20
MAX_FILE_BYTES = 1_000_000  # what GitHub's contents API returns inline; bigger is not read
MAX_GLOBS = 50

_FRONT = re.compile(r"\A---[ \t]*\n(?P<meta>.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)
_APPLY_TO = re.compile(r"^applyTo[ \t]*:[ \t]*(?P<value>.*?)[ \t]*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Piece:
    """One source of instructions as read: its name, its text, and its globs (None: every
    file; an empty tuple: no file)."""

    source: str
    text: str
    globs: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """A source that was not used, and why (said in the summary)."""

    source: str
    reason: str


@dataclass(frozen=True, slots=True)
class Instruction:
    """A piece as the agents get it: cut to the caps (`kept` of its `length` characters,
    then a visible marker)."""

    source: str
    text: str
    kept: int
    length: int
    globs: tuple[str, ...] | None = None

    @property
    def cut(self) -> bool:
        return self.kept < self.length

    def applies_to(self, paths: Sequence[str]) -> bool:
        """Whether this instruction is about any of `paths` (always, without globs)."""
        return self.globs is None or any(glob_match(p, self.globs) for p in paths)


@dataclass(frozen=True, slots=True)
class InstructionSet:
    """The instructions of one run, and what was refused or left out."""

    used: tuple[Instruction, ...] = ()
    refused: tuple[Refused, ...] = ()

    def everywhere(self) -> tuple[Instruction, ...]:
        return tuple(i for i in self.used if i.globs is None)

    def scoped_for(self, paths: Sequence[str]) -> tuple[Instruction, ...]:
        """The path-scoped instructions about any of `paths`."""
        return tuple(i for i in self.used if i.globs is not None and i.applies_to(paths))

    def notes(self, paths: Sequence[str] | None = None) -> list[tuple[str, str]]:
        """(source, what became of it, in Markdown: globs as code) per source: used (cut or
        not, scoped to which files), or why not. With `paths` (the reviewed files), a scoped one that matched none says so."""
        lines: list[tuple[str, str]] = []
        for i in self.used:
            said = f"used, {i.length:,} characters"
            if i.cut:
                said = f"used, cut to its first {i.kept:,} of {i.length:,} characters"
            if i.globs is not None:
                said += f", for {', '.join(code_span(g) for g in i.globs)}"
                if paths is not None and not i.applies_to(paths):
                    said += ", which matched no reviewed file"
            lines.append((i.source, said))
        lines += [(r.source, f"not used: {r.reason}") for r in self.refused]
        return lines


def split_front_matter(text: str) -> tuple[tuple[str, ...] | None, str]:
    """The `applyTo` globs of an instructions file's front matter (None when it has none)
    and the text after the front matter. `applyTo: "src/**/*.py,tests/**"`: quotes optional,
    comma-separated; empty entries are dropped."""
    match = _FRONT.match(text.replace("\r\n", "\n"))
    if match is None:
        return None, text
    body = text.replace("\r\n", "\n")[match.end() :]
    found = _APPLY_TO.search(match.group("meta"))
    if found is None:
        return None, body
    value = found.group("value").strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    globs = tuple(g.strip() for g in value.split(",") if g.strip())[:MAX_GLOBS]
    return globs, body


def content_problem(
    requested: str,
    *,
    kind: str | None,
    path: str | None,
    size: int | None,
    encoding: str | None,
    raw: bytes | None,
) -> str | None:
    """Why a file as GitHub's contents API answered for `requested` is not read, or None.

    GitHub answers a symbolic link to a file with that file (under the file's own path), a
    link to anything else as `type: symlink`; files over 1 MB come with `encoding: none`."""
    if kind == "symlink" or (path is not None and path.strip("/") != requested.strip("/")):
        return "it is a symbolic link"
    if kind != "file":
        return f"it is not a file ({kind or 'unknown'})"
    if (size or 0) > MAX_FILE_BYTES or encoding != "base64" or raw is None:
        return f"it is over {MAX_FILE_BYTES // 1_000_000} MB"
    if b"\0" in raw:
        return "it is binary"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return "it is binary (not UTF-8 text)"
    return None


def _cut(text: str, limit: int) -> str:
    return text[:limit] + f"\n[… cut: the first {limit:,} of {len(text):,} characters shown]"


def collect(pieces: Sequence[Piece], refused: Sequence[Refused] = ()) -> InstructionSet:
    """The pieces within the caps (see the module docstring), in the order given. Empty pieces
    are dropped; a scoped piece whose globs are empty applies nowhere and is refused."""
    room = TOTAL_LIMIT
    used: list[Instruction] = []
    left: list[Refused] = list(refused)
    for piece in pieces:
        text = piece.text.strip()
        if not text:
            continue
        if piece.globs is not None and not piece.globs:
            left.append(Refused(piece.source, "no `applyTo` globs: it applies to no file"))
            continue
        limit = min(FILE_LIMIT, room)
        if limit < MIN_PIECE:
            left.append(Refused(piece.source, f"over the {TOTAL_LIMIT:,}-character total"))
            continue
        kept = min(len(text), limit)
        shown = text if kept == len(text) else _cut(text, limit)
        used.append(Instruction(piece.source, shown, kept, len(text), piece.globs))
        room -= kept
    return InstructionSet(tuple(used), tuple(left))
