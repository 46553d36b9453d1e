"""Which changed files a review looks at, grouped into units, ranked, and fitted to a budget.

`plan_review` takes the pull request's changed files (from the local diff) and the repository's
review settings, and returns the units to review, most important first, and every file it will
not review with the reason, so the summary can name them: nothing is left out silently.

Reasons, in the order they are checked: a submodule pointer's move (another repository's
commits, which are not in this one to review), `removed` (nothing left to comment on), `binary`,
`excluded by review.paths`, `excluded by review.ignore`, `lock file`, `vendored`, `generated`,
`too large` (a patch over `max_file_lines` changed lines), `unchanged since the last review`
(only on a follow-up), then `over budget` (past `max_files` or `max_tokens`).

A follow-up never costs more than a full review would: when its plan, sized by the push's
delta, is estimated at least at a full review's (`review_whole`), it reviews its files' whole
patches instead.

A unit is one file, or a few small files that belong together (a module and its test, or small
files of one directory), so one agent call sees related changes side by side. Ranking puts
source code before configuration, tests and docs, paths that look security-sensitive first
within each, and larger changes before smaller ones.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache

from policies.diff import SUBMODULE_MODE, FilePatch

OVERHEAD_TOKENS = 1_500  # instructions, schema and context wrapping per unit call
CALLS_PER_UNIT = 2  # a reviewer, then a verifier that sees the same patch
ONE_CALL_LINES = 40
"""A follow-up unit whose delta changes fewer lines than this is reviewed and ruled on in one
agent call (`one_call`): the fixed cost of a second call would outweigh its changes."""


def one_call(follow_up: bool, delta_lines: Sequence[int | None]) -> bool:
    """Whether a unit is reviewed in one call: on a follow-up, when every file of it shows its
    delta (None: a file shown whole) and those deltas change fewer than ONE_CALL_LINES lines."""
    if not follow_up or not delta_lines or any(n is None for n in delta_lines):
        return False
    return sum(n for n in delta_lines if n is not None) < ONE_CALL_LINES


SUMMARY_TOKENS = OVERHEAD_TOKENS
"""A full review's last call, the advisor's summary; a follow-up makes it only when a push
brought something serious, so its estimate leaves it out."""


UNIT_MAX_FILES = 4
UNIT_SMALL_LINES = 60  # files with fewer changed lines may share a unit
UNIT_MAX_LINES = 200

LOCK_FILES = frozenset(
    {
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lockb",
        "poetry.lock",
        "pdm.lock",
        "uv.lock",
        "pipfile.lock",
        "cargo.lock",
        "gemfile.lock",
        "composer.lock",
        "go.sum",
        "mix.lock",
        "podfile.lock",
        "packages.lock.json",
        "flake.lock",
    }
)
_VENDORED = re.compile(
    r"(?:^|/)(?:vendor|vendored|third_party|third-party|node_modules|bower_components|"
    r"site-packages|\.yarn)/",
    re.IGNORECASE,
)
_GENERATED = re.compile(
    r"(?:\.min\.(?:js|css)$|\.map$|_pb2(?:_grpc)?\.pyi?$|\.pb\.go$|\.generated\.[^/]+$|"
    r"(?:^|/)(?:dist|build|generated|__generated__)/|\.snap$)",
    re.IGNORECASE,
)
_SOURCE_EXT = frozenset(
    [
        "py",
        "pyi",
        "js",
        "jsx",
        "ts",
        "tsx",
        "mjs",
        "cjs",
        "go",
        "rs",
        "java",
        "kt",
        "kts",
        "scala",
        "c",
        "h",
        "cc",
        "cpp",
        "hpp",
        "cs",
        "rb",
        "php",
        "swift",
        "m",
        "mm",
        "sh",
        "bash",
        "zsh",
        "ps1",
        "sql",
        "lua",
        "pl",
        "ex",
        "exs",
        "erl",
        "hs",
        "ml",
        "clj",
        "dart",
        "r",
        "jl",
        "vue",
        "svelte",
    ]
)
_CONFIG_EXT = frozenset(
    ["yml", "yaml", "toml", "ini", "cfg", "conf", "json", "xml", "gradle", "tf", "hcl", "nix"]
)
_DOC_EXT = frozenset(["md", "rst", "txt", "adoc", "org"])
_SENSITIVE = re.compile(
    r"auth|login|passw|secret|token|crypt|security|permission|session|cookie|csrf|oauth|"
    r"sanitiz|escape|migrat|payment|billing|\.github/workflows/|dockerfile|setup\.py|"
    r"pyproject\.toml|requirements",
    re.IGNORECASE,
)
_TEST = re.compile(r"(?:^|/)(?:tests?|spec|__tests__)/|(?:^|/)test_[^/]*$|_test\.[^/.]+$|\.spec\.")


@dataclass(frozen=True, slots=True)
class ChangedFile:
    """One file of the pull request's diff, as much as the plan needs."""

    path: str
    status: str = "modified"  # added | removed | modified | renamed
    additions: int = 0
    deletions: int = 0
    binary: bool = False
    patch_chars: int = 0
    submodule: tuple[str, str] | None = None
    """For a submodule pointer: the commits it pointed at before and after ("" for none)."""

    @property
    def changed(self) -> int:
        return self.additions + self.deletions


def changed_file(patch: FilePatch) -> ChangedFile:
    """What the plan needs of one file's patch."""
    return ChangedFile(
        path=patch.path,
        status=patch.status,
        additions=patch.additions,
        deletions=patch.deletions,
        binary=patch.binary,
        patch_chars=len(patch.patch),
        submodule=_pointer(patch),
    )


def _pointer(patch: FilePatch) -> tuple[str, str] | None:
    """The commits a submodule pointer moved between, when the path is one after the change
    (or was one before it was removed); a pointer replaced by a file is reviewed as that file."""
    old = patch.old_oid if patch.old_mode == SUBMODULE_MODE else ""
    new = patch.new_oid if patch.new_mode == SUBMODULE_MODE else ""
    if new or (old and patch.status == "removed"):
        return old, new
    return None


@dataclass(frozen=True, slots=True)
class Unit:
    """Files reviewed together by one agent call, with the call's estimated input tokens."""

    paths: tuple[str, ...]
    risk: int
    changed: int
    tokens: int


@dataclass(frozen=True, slots=True)
class Skipped:
    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class ReviewPlan:
    units: tuple[Unit, ...]
    skipped: tuple[Skipped, ...]
    tokens: int

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(p for unit in self.units for p in unit.paths)


@dataclass(frozen=True, slots=True)
class PlanLimits:
    """The budget of one review (from `.github/bot.yml`'s `review` section)."""

    max_files: int = 50
    max_tokens: int = 200_000
    max_file_lines: int = 1_500
    paths: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A gitignore-like glob: `*` within a name, `**` across directories, `?` one character;
    a pattern without `/` matches a file or directory name at any depth."""
    pat = pattern.strip().lstrip("/")
    anchored = "/" in pat.rstrip("/")
    if pat.endswith("/"):
        pat += "**"
    out = []
    i = 0
    while i < len(pat):
        if pat.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif pat[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pat[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pat[i]))
            i += 1
    body = "".join(out)
    prefix = "" if anchored else "(?:[^/]+/)*"
    return re.compile(f"^{prefix}{body}(?:/.*)?$")


def glob_match(path: str, patterns: Sequence[str]) -> bool:
    """Whether `path` matches any of the glob patterns."""
    return any(p.strip() and _glob_regex(p.strip()).match(path) for p in patterns)


def _ext(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name else name.lower()


def risk_of(path: str) -> int:
    """Higher is reviewed first: source 30, config 20, tests 15, docs 5, other 10;
    +10 for a path that looks security-sensitive."""
    ext = _ext(path)
    if _TEST.search(path):
        base = 15
    elif ext in _SOURCE_EXT:
        base = 30
    elif ext in _CONFIG_EXT or path.startswith(".github/") or ext == "dockerfile":
        base = 20
    elif ext in _DOC_EXT:
        base = 5
    else:
        base = 10
    return base + (10 if _SENSITIVE.search(path) else 0)


def _submodule_reason(old: str, new: str) -> str:
    before, after = old[:12], new[:12]
    if before and after:
        return f"submodule pointer moved from {before} to {after}: not reviewed"
    if after:
        return f"submodule added at {after}: not reviewed"
    return f"submodule removed (it was at {before or 'an unknown commit'}): not reviewed"


def skip_reason(file: ChangedFile, limits: PlanLimits) -> str | None:
    """Why a file is left out of the review before any budget is spent, or None."""
    path = file.path
    name = path.rsplit("/", 1)[-1].lower()
    if file.submodule is not None:
        return _submodule_reason(*file.submodule)
    if file.status == "removed":
        return "removed"
    if file.binary:
        return "binary"
    if limits.paths and not glob_match(path, limits.paths):
        return "excluded by review.paths"
    if limits.ignore and glob_match(path, limits.ignore):
        return "excluded by review.ignore"
    if name in LOCK_FILES:
        return "lock file"
    if _VENDORED.search(path):
        return "vendored"
    if _GENERATED.search(path):
        return "generated"
    if file.changed > limits.max_file_lines:
        return f"too large ({file.changed} changed lines, limit {limits.max_file_lines})"
    return None


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    stem = name.split(".", 1)[0].lower()
    stem = stem.removeprefix("test_").removesuffix("_test").removesuffix("_spec")
    return stem


def _dir(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def tokens_for(files: Sequence[ChangedFile]) -> int:
    """Estimated input tokens of reviewing these files together (characters / 4)."""
    chars = sum(f.patch_chars for f in files)
    return CALLS_PER_UNIT * (OVERHEAD_TOKENS + chars // 4 + 1)


def _group(files: Sequence[ChangedFile]) -> list[list[ChangedFile]]:
    """Small related files share a unit: same stem first (a module and its test), then the
    same directory; a file with many changed lines is a unit of its own."""
    groups: list[list[ChangedFile]] = []
    by_key: dict[tuple[str, str], list[ChangedFile]] = {}
    for f in files:
        if f.changed >= UNIT_SMALL_LINES:
            groups.append([f])
            continue
        placed = False
        for key in (("stem", _stem(f.path)), ("dir", _dir(f.path))):
            group = by_key.get(key)
            if (
                group is not None
                and len(group) < UNIT_MAX_FILES
                and sum(g.changed for g in group) + f.changed <= UNIT_MAX_LINES
            ):
                group.append(f)
                placed = True
                break
        if not placed:
            group = [f]
            groups.append(group)
            by_key.setdefault(("stem", _stem(f.path)), group)
            by_key.setdefault(("dir", _dir(f.path)), group)
    return _pack(groups)


def _pack(groups: list[list[ChangedFile]]) -> list[list[ChangedFile]]:
    """Small groups left over are packed together: every agent call costs its instructions
    and context again, which on a small change outweighs the change itself."""
    out: list[list[ChangedFile]] = []
    spare: list[ChangedFile] | None = None
    for group in groups:
        lines = sum(f.changed for f in group)
        if lines >= UNIT_SMALL_LINES:
            out.append(group)
            continue
        if (
            spare is not None
            and len(spare) + len(group) <= UNIT_MAX_FILES
            and sum(f.changed for f in spare) + lines <= UNIT_MAX_LINES
        ):
            spare.extend(group)
            continue
        spare = list(group)
        out.append(spare)
    return out


def plan_review(
    files: Sequence[ChangedFile],
    limits: PlanLimits,
    *,
    unchanged: Collection[str] = (),
) -> ReviewPlan:
    """The units to review, ranked, within `limits`; every other file with its reason.

    `unchanged` names files whose patch is the same as at the last review: they are listed
    as such and cost nothing.
    """
    skipped: list[Skipped] = []
    candidates: list[ChangedFile] = []
    for f in files:
        reason = skip_reason(f, limits)
        if reason is None and f.path in unchanged:
            reason = "unchanged since the last review"
        if reason is not None:
            skipped.append(Skipped(f.path, reason))
        else:
            candidates.append(f)
    ranked = sorted(candidates, key=lambda f: (-risk_of(f.path), -f.changed, f.path))
    units: list[Unit] = []
    spent = 0
    reviewed = 0
    for group in _group(ranked):
        cost = tokens_for(group)
        within_files = reviewed + len(group) <= limits.max_files
        if within_files and spent + cost <= limits.max_tokens:
            units.append(
                Unit(
                    paths=tuple(f.path for f in group),
                    risk=max(risk_of(f.path) for f in group),
                    changed=sum(f.changed for f in group),
                    tokens=cost,
                )
            )
            spent += cost
            reviewed += len(group)
            continue
        if len(group) > 1:  # try the group's files one by one before giving up on them
            for f in group:
                one = tokens_for([f])
                if reviewed + 1 <= limits.max_files and spent + one <= limits.max_tokens:
                    units.append(Unit((f.path,), risk_of(f.path), f.changed, one))
                    spent += one
                    reviewed += 1
                else:
                    skipped.append(Skipped(f.path, "over budget"))
            continue
        skipped.append(Skipped(group[0].path, "over budget"))
    return ReviewPlan(units=tuple(units), skipped=tuple(skipped), tokens=spent)


def follow_up_tokens(
    plan: ReviewPlan,
    one_call_units: Sequence[bool],
    *,
    rechecked: int = 0,
    rechecked_alone: int = 0,
) -> int:
    """The estimated input tokens of a follow-up: its units' calls (one for a `one_call`
    unit, by `one_call_units` in the plan's order), the re-checks its units' reviewers rule
    on (`rechecked`: the characters of those findings and their code), and a re-check call
    of its own for the findings no unit's reviewer reads (`rechecked_alone` characters)."""
    units = sum(
        u.tokens // CALLS_PER_UNIT if one else u.tokens
        for u, one in zip(plan.units, one_call_units, strict=True)
    )
    alone = OVERHEAD_TOKENS + rechecked_alone // 4 if rechecked_alone else 0
    return units + rechecked // 4 + alone


def full_review_tokens(plan: ReviewPlan) -> int:
    """The estimated input tokens of a full review planned as `plan`: its units' calls, then
    the summary."""
    return plan.tokens + SUMMARY_TOKENS


def review_whole(follow_up: int, full: int) -> bool:
    """Whether a follow-up reviews its files' whole patches rather than the push's delta:
    when, in `follow_up_tokens`, it would cost at least as much as a full review of the pull
    request (`full_review_tokens`). The whole patches cost at most what the full review's
    units do, and the follow-up still re-checks the findings it owes."""
    return follow_up >= full
