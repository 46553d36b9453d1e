"""The pure decisions of `fix`: which changes need a maintainer, the branch name, the PR text.

`classify_change` reads the agent's change (from `git diff --name-status` and `--numstat`
against the base) and says why it is high-risk, if it is: workflow files (the App has no
`workflows` permission, so GitHub would refuse the push), paths matching
`fix.protected_paths`, deleted files, more than `fix.max_deleted_lines` deleted lines,
dependency manifests and lock files, anything that touches credentials, submodule pointers
(and `.gitmodules`), and symbolic links that point outside the repository or replace a file
(or are replaced by one). `request_risk`
applies the same rules to the paths a request names, so such a request stops before any
agent runs. Either report becomes a BLOCKED decision through `blocked_for`; the report never
quotes a secret it found, only where it is.

What a report asks about is recorded with it (`asked_for`: each risk as its kind and action,
and the options that approve them: "go ahead" and "attach a patch"). A `decide` that picks one
of those options of that report approves exactly those risks and nothing else; `outstanding`
is what a change does beyond them, which needs a new report. The comparison is on the kind
and the action's words alone, so a new kind of risk needs nothing here.

The branch name, the pull request text and the commit trailer are built in `_fix_text` and
exported from here.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from policies._fix_text import (
    CheckResult,
    agent_commit_message,
    branch_name,
    co_author_trailer,
    code_span,
    is_fix_branch,
    pull_request_text,
    with_trailer,
)
from policies.config import FixConfig
from policies.links import resolves_outside
from policies.outcome import Asked, AskedRisk
from policies.review_plan import LOCK_FILES, glob_match

__all__ = [
    "FIX_OPTIONS",
    "OPTION_NARROW",
    "OPTION_PATCH",
    "OPTION_PROCEED",
    "OPTION_STOP",
    "Change",
    "CheckResult",
    "FixChoice",
    "ModeChange",
    "RiskKind",
    "RiskReason",
    "RiskReport",
    "agent_commit_message",
    "asked_for",
    "blocked_for",
    "branch_name",
    "choice_of",
    "classify_change",
    "co_author_trailer",
    "is_fix_branch",
    "outstanding",
    "pull_request_text",
    "request_risk",
    "with_trailer",
]

# (status, path, old path or None, added lines, deleted lines); None counts for binary files.
Change = tuple[str, str, str | None, int | None, int | None]
RiskKind = Literal[
    "workflow",
    "protected",
    "credentials",
    "deleted_file",
    "deleted_lines",
    "dependencies",
    "submodule",
    "symlink",
]
FixChoice = Literal["proceed", "patch", "narrow", "stop", "answer"]
"""What a decision tells the follow-up to do; "answer" is free text (or an option a model
wrote), which the implementer acts on. None of them approves a risk: see `asked_for`."""

OPTION_PROCEED = (
    "Go ahead as described: push the change to a new `bot/fix-*` branch and open a draft "
    "pull request"
)
OPTION_PATCH = "Make the change but push nothing: attach it as a patch to apply by hand"
OPTION_NARROW = "Make the fix without the changes listed above"
OPTION_STOP = "Do nothing"
_APPROVING = (OPTION_PROCEED, OPTION_PATCH)
"""The options of the app's own report that approve the risks it names."""
FIX_OPTIONS: Mapping[str, FixChoice] = {
    OPTION_PROCEED: "proceed",
    OPTION_PATCH: "patch",
    OPTION_NARROW: "narrow",
    OPTION_STOP: "stop",
}

_WHY: Mapping[RiskKind, str] = {
    "workflow": (
        "workflow files run with the repository's secrets, and the app has no `workflows` "
        "permission: GitHub refuses a push that changes them"
    ),
    "protected": "`fix.protected_paths` in `.github/bot.yml` says a maintainer decides these",
    "credentials": "a credential pushed to a branch is readable by everyone who can read the "
    "repository, and stays in its history",
    "deleted_file": "deleting files cannot be reviewed line by line, and what is gone is "
    "easy to miss",
    "deleted_lines": "a large deletion is easy to get wrong and hard to review",
    "dependencies": "a dependency change alters what every build installs, and a rewritten "
    "lock file cannot be reviewed by reading it",
    "submodule": "a submodule pointer names a commit of another repository, which is not here "
    "to be reviewed, and every checkout with submodules fetches and builds it",
    "symlink": "a symbolic link that leaves the repository, or a file that becomes a link, "
    "lets whatever reads or writes that path in a checkout (CI, tools, editors) reach files "
    "elsewhere on the machine",
}
_RISK: Mapping[RiskKind, str] = {
    "workflow": "CI could run changed code with the repository's secrets.",
    "protected": "A path the maintainers reserved would change without them.",
    "credentials": "A secret could be exposed and would then have to be rotated.",
    "deleted_file": "Code or data still in use could be removed.",
    "deleted_lines": "Code still in use could be removed.",
    "dependencies": "Builds could install different or compromised packages.",
    "submodule": "Checkouts could fetch and run another repository's code that nobody reviewed.",
    "symlink": "Tools or CI following the link could read or overwrite files outside the "
    "repository.",
}
_ORDER: tuple[RiskKind, ...] = tuple(_WHY)

_MANIFESTS = frozenset(
    {
        "package.json",
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "pipfile",
        "cargo.toml",
        "go.mod",
        "gemfile",
        "composer.json",
        "pom.xml",
        "build.gradle",
        "build.gradle.kts",
        "environment.yml",
        "mix.exs",
        "package.swift",
        "pubspec.yaml",
        "deno.json",
        "packages.config",
        "directory.packages.props",
        "vcpkg.json",
        "conanfile.txt",
    }
)
_CREDENTIAL_NAME = re.compile(
    r"^(?:\.env(?:\.(?!example$|sample$|template$|dist$)[^/]+)?|[^/]*\.(?:pem|key|p12|pfx|jks|"
    r"keystore)|id_(?:rsa|dsa|ecdsa|ed25519)[^/]*|secrets?\.[^/]+|credentials[^/]*|\.netrc|"
    r"\.npmrc|\.pypirc|\.htpasswd)$",
    re.IGNORECASE,
)
_SECRETS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_\w{22,})")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("an API key", re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_-]{20,}")),
    (
        "a hard-coded secret",
        re.compile(
            r"(?i)(?:password|passwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token|"
            r"private[_-]?key)[\"']?\s*[:=]\s*[\"'][^\"'\s]{8,}[\"']"
        ),
    ),
)
_VERBS = {"A": "add", "C": "copy", "D": "delete", "R": "rename", "T": "change the type of"}
_LISTED = 5  # actions named in the decision line
_LISTED_WHY = 30  # actions named in the explanation, per reason
_WORKFLOW_MENTION = re.compile(r"\.github[/\\]+workflows\b[^\s`'\"<>()\[\],;]*", re.IGNORECASE)
_PATH_MENTION = re.compile(r"[\w.\-/]+")


_SUBMODULE = "160000"
_SYMLINK = "120000"
_NONE = ("", "000000")


@dataclass(frozen=True, slots=True)
class ModeChange:
    """What a change does to a path besides its lines, from git's raw records: the modes
    before and after ("000000" or "" for none), the object ids, and a link's new target."""

    path: str
    old_mode: str
    new_mode: str
    old_oid: str = ""
    new_oid: str = ""
    target: str | None = None
    """The symbolic link's target after the change; None when it is not a link or unread."""


@dataclass(frozen=True, slots=True)
class RiskReason:
    """One reason a change needs a decision: its kind and exactly what would be done."""

    kind: RiskKind
    actions: tuple[str, ...]
    """What would be done, one item each, e.g. "change `.github/workflows/ci.yml`"."""


@dataclass(frozen=True, slots=True)
class RiskReport:
    """Why a change, or a request for one, needs a maintainer's decision first."""

    reasons: tuple[RiskReason, ...]
    source: Literal["change", "request"] = "change"

    @property
    def kinds(self) -> frozenset[RiskKind]:
        """The kinds of risk found."""
        return frozenset(reason.kind for reason in self.reasons)

    @property
    def pushable(self) -> bool:
        """Whether GitHub would accept a push of this change at all."""
        return "workflow" not in self.kinds


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _is_workflow(path: str) -> bool:
    lower = path.lower().strip("/")
    return lower in (".github", ".github/workflows") or lower.startswith(".github/workflows/")


def _dependency(path: str) -> bool:
    lower = path.lower()
    name = _name(lower)
    requirements = name.endswith((".txt", ".in")) and (
        "requirements" in name or f"/{lower}".rsplit("/", 2)[-2] == "requirements"
    )
    return name in LOCK_FILES or name in _MANIFESTS or requirements


def _credential_path(path: str) -> bool:
    return bool(_CREDENTIAL_NAME.match(_name(path)))


def _action(status: str, path: str, old_path: str | None) -> str:
    letter = status[:1].upper()
    verb = _VERBS.get(letter, "change")
    if letter in ("R", "C") and old_path and old_path != path:
        return f"{verb} {code_span(old_path)} to {code_span(path)}"
    return f"{verb} {code_span(path)}"


def _short(oid: str) -> str:
    return code_span(oid[:12])


def _mode_risks(mode: ModeChange) -> list[tuple[RiskKind, str]]:
    """The submodule and link risks of one path's mode change."""
    old, new, where = mode.old_mode, mode.new_mode, code_span(mode.path)
    out: list[tuple[RiskKind, str]] = []
    if _SUBMODULE in (old, new):
        if old == new:
            what = f"move the submodule {where} from {_short(mode.old_oid)} to "
            out.append(("submodule", what + _short(mode.new_oid)))
        elif new == _SUBMODULE:
            out.append(("submodule", f"add the submodule {where} at {_short(mode.new_oid)}"))
        else:
            out.append(("submodule", f"remove the submodule {where}"))
    if new == _SYMLINK and old not in _NONE and old != _SYMLINK:
        out.append(("symlink", f"turn {where} into a symbolic link"))
    elif old == _SYMLINK and new not in _NONE and new != _SYMLINK:
        out.append(("symlink", f"turn the symbolic link {where} into a file"))
    elif new == _SYMLINK and mode.target is None:
        out.append(("symlink", f"link {where} to a target that could not be read"))
    return out


def _link_risks(
    modes: Sequence[ModeChange], links: Mapping[str, str] | None
) -> list[tuple[RiskKind, str]]:
    """Links that lead out of the tree because of this change: a changed link that does, or
    any link of the final tree whose way out goes through a changed one."""
    changed = {m.path: m.target for m in modes if m.new_mode == _SYMLINK and m.target is not None}
    touched = {m.path for m in modes if _SYMLINK in (m.old_mode, m.new_mode)}
    tree = dict(links) if links is not None else {}
    tree.update(changed)
    candidates = tree if links is not None else changed
    out: list[tuple[RiskKind, str]] = []
    for path, target in candidates.items():
        where = resolves_outside(path, target, tree)
        if not where.outside or not (where.through & touched):
            continue
        action = f"link {code_span(path)} to {code_span(target)}, outside the repository"
        others = sorted((where.through & touched) - {path})
        if others:
            action += " (through " + ", ".join(code_span(p) for p in others) + ")"
        out.append(("symlink", action))
    return out


def _reasons(found: Mapping[RiskKind, list[str]]) -> RiskReport | None:
    reasons = tuple(
        RiskReason(kind, tuple(dict.fromkeys(found[kind]))) for kind in _ORDER if found.get(kind)
    )
    return RiskReport(reasons) if reasons else None


def classify_change(
    changes: Sequence[Change],
    config: FixConfig,
    added: Mapping[str, str] | None = None,
    *,
    modes: Sequence[ModeChange] = (),
    links: Mapping[str, str] | None = None,
) -> RiskReport | None:
    """Why the agent's change is high-risk, or None when it may be pushed as it is.

    `added` optionally maps a path to its added lines, which are searched for things that
    look like tokens or keys (the report names the path and the kind, never the value).
    `modes` lists the paths whose mode is or was a submodule pointer or a symbolic link
    (from git's raw records, with each link's new target). `links`, every symbolic link of
    the changed tree (path -> target), lets a link be followed through the others; without
    it each changed link is judged on its own target.
    """
    found: dict[RiskKind, list[str]] = {}
    deleted = 0
    for status, path, old_path, _additions, deletions in changes:
        action = _action(status, path, old_path)
        paths = [p for p in (path, old_path) if p]
        checks: tuple[tuple[RiskKind, bool], ...] = (
            ("workflow", any(_is_workflow(p) for p in paths)),
            ("protected", any(glob_match(p, config.protected_paths) for p in paths)),
            ("credentials", any(_credential_path(p) for p in paths)),
            ("deleted_file", status[:1].upper() == "D"),
            ("dependencies", any(_dependency(p) for p in paths)),
            ("submodule", any(p.lower() == ".gitmodules" for p in paths)),
        )
        for kind, hit in checks:
            if hit:
                found.setdefault(kind, []).append(action)
        deleted += deletions or 0
    for mode in modes:
        for kind, action in _mode_risks(mode):
            found.setdefault(kind, []).append(action)
    for kind, action in _link_risks(modes, links):
        found.setdefault(kind, []).append(action)
    for path, text in (added or {}).items():
        for what, pattern in _SECRETS:
            if pattern.search(text):
                found.setdefault("credentials", []).append(f"add {what} to {code_span(path)}")
    if deleted > config.max_deleted_lines:
        found["deleted_lines"] = [
            f"delete {deleted} lines in total (`fix.max_deleted_lines` is "
            f"{config.max_deleted_lines})"
        ]
    return _reasons(found)


def request_risk(text: str, config: FixConfig | None = None) -> RiskReport | None:
    """Why a request asks for a high-risk change itself, or None.

    The rules are simple on purpose: a mention of `.github/workflows` is enough; so is a path
    in the request that is a lock file, looks like a credential, or matches
    `fix.protected_paths`. Manifests such as `package.json` are often named as context, so
    they are judged on the change instead.
    """
    found: dict[RiskKind, list[str]] = {}
    for match in _WORKFLOW_MENTION.finditer(text):
        found.setdefault("workflow", []).append(f"change {code_span(match.group().rstrip('.'))}")
    for match in _PATH_MENTION.finditer(_WORKFLOW_MENTION.sub(" ", text)):
        path = match.group().rstrip(".").removeprefix("./")
        if not re.search(r"[A-Za-z0-9]", path):
            continue
        action = f"change {code_span(path)}"
        if config is not None and glob_match(path, config.protected_paths):
            found.setdefault("protected", []).append(action)
        file_like = "." in path or "/" in path or path.lower().startswith("id_")
        if file_like and _credential_path(path):
            found.setdefault("credentials", []).append(action)
        if _name(path).lower() in LOCK_FILES:
            found.setdefault("dependencies", []).append(f"rewrite {code_span(path)}")
    report = _reasons(found)
    return RiskReport(report.reasons, source="request") if report else None


def _listed(actions: Sequence[str], limit: int = _LISTED) -> str:
    shown = list(actions[:limit])
    if len(actions) > limit:
        shown.append(f"{len(actions) - limit} more")
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def _options(report: RiskReport) -> list[str]:
    options = [OPTION_PATCH, OPTION_NARROW, OPTION_STOP]
    if report.pushable:
        options.insert(0, OPTION_PROCEED)
    return options


def _risks(report: RiskReport) -> tuple[AskedRisk, ...]:
    return tuple(
        AskedRisk(reason.kind, action) for reason in report.reasons for action in reason.actions
    )


def asked_for(report: RiskReport) -> Asked:
    """What the BLOCKED report `blocked_for(report)` asks to approve, and the options that do:
    going ahead, where the change can be pushed, and attaching it as a patch."""
    return Asked(_risks(report), tuple(o for o in _options(report) if o in _APPROVING))


def outstanding(report: RiskReport, approved: Collection[AskedRisk]) -> RiskReport | None:
    """The part of `report` that `approved` does not cover, or None when it covers it all."""
    reasons = []
    for reason in report.reasons:
        left = tuple(a for a in reason.actions if AskedRisk(reason.kind, a) not in approved)
        if left:
            reasons.append(RiskReason(reason.kind, left))
    return RiskReport(tuple(reasons), report.source) if reasons else None


def blocked_for(
    report: RiskReport, approved: Collection[AskedRisk] = frozenset()
) -> dict[str, object]:
    """The BLOCKED section (`policies.outcome.BlockedResult`'s shape) for a risk report.

    `approved` is what the answer that started this run approved: those actions are still
    listed (going ahead approves the whole report again) and said to be approved already.
    """
    actions = [action for reason in report.reasons for action in reason.actions]
    subject = "The request asks to" if report.source == "request" else "This fix would"
    why = []
    for reason in report.reasons:
        new = [a for a in reason.actions if AskedRisk(reason.kind, a) not in approved]
        old = [a for a in reason.actions if AskedRisk(reason.kind, a) in approved]
        if new:
            why.append(f"- {_listed(new, _LISTED_WHY)}: {_WHY[reason.kind]}.")
        if old:
            why.append(f"- {_listed(old, _LISTED_WHY)} (already approved): {_WHY[reason.kind]}.")
    options = _options(report)
    if not report.pushable:
        why.append("- So the app cannot push this change; it can attach it as a patch.")
    beyond = ", more than the answer to the last question approved" if approved else ""
    return {
        "decision": f"{subject} {_listed(actions)}{beyond}. Should it go ahead?",
        "why": "\n".join(why),
        "options": options,
        "default": OPTION_STOP,
        "risk": " ".join(dict.fromkeys(_RISK[reason.kind] for reason in report.reasons)),
    }


def choice_of(decision: str) -> FixChoice | None:
    """Which of the BLOCKED options a decision's text is, or None for free text."""
    flat = " ".join(decision.split()).strip().lower()
    for text, choice in FIX_OPTIONS.items():
        if flat == text.lower():
            return choice
    return None
