"""The pure decisions of `fix`: which changes need a maintainer, the branch name, the PR text.

`classify_change` reads the agent's change (from `git diff --name-status` and `--numstat`
against the base) and says why it is high-risk, if it is: workflow files (the App has no
`workflows` permission, so GitHub would refuse the push), paths matching
`fix.protected_paths`, deleted files, more than `fix.max_deleted_lines` deleted lines,
dependency manifests and lock files, and anything that touches credentials. `request_risk`
applies the same rules to the paths a request names, so such a request stops before any
agent runs. Either report becomes a BLOCKED decision through `blocked_for`; the report never
quotes a secret it found, only where it is.

The branch name, the pull request text and the commit trailer are built in `_fix_text` and
exported from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
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
    "RiskKind",
    "RiskReason",
    "RiskReport",
    "agent_commit_message",
    "blocked_for",
    "branch_name",
    "choice_of",
    "classify_change",
    "co_author_trailer",
    "is_fix_branch",
    "pull_request_text",
    "request_risk",
    "with_trailer",
]

# (status, path, old path or None, added lines, deleted lines); None counts for binary files.
Change = tuple[str, str, str | None, int | None, int | None]
RiskKind = Literal[
    "workflow", "protected", "credentials", "deleted_file", "deleted_lines", "dependencies"
]
FixChoice = Literal["proceed", "patch", "narrow", "stop"]

OPTION_PROCEED = (
    "Go ahead as described: push the change to a new `bot/fix-*` branch and open a draft "
    "pull request"
)
OPTION_PATCH = "Make the change but push nothing: attach it as a patch to apply by hand"
OPTION_NARROW = "Make the fix without the changes listed above"
OPTION_STOP = "Do nothing"
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
}
_RISK: Mapping[RiskKind, str] = {
    "workflow": "CI could run changed code with the repository's secrets.",
    "protected": "A path the maintainers reserved would change without them.",
    "credentials": "A secret could be exposed and would then have to be rotated.",
    "deleted_file": "Code or data still in use could be removed.",
    "deleted_lines": "Code still in use could be removed.",
    "dependencies": "Builds could install different or compromised packages.",
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


def _reasons(found: Mapping[RiskKind, list[str]]) -> RiskReport | None:
    reasons = tuple(
        RiskReason(kind, tuple(dict.fromkeys(found[kind]))) for kind in _ORDER if found.get(kind)
    )
    return RiskReport(reasons) if reasons else None


def classify_change(
    changes: Sequence[Change], config: FixConfig, added: Mapping[str, str] | None = None
) -> RiskReport | None:
    """Why the agent's change is high-risk, or None when it may be pushed as it is.

    `added` optionally maps a path to its added lines, which are searched for things that
    look like tokens or keys (the report names the path and the kind, never the value).
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
        )
        for kind, hit in checks:
            if hit:
                found.setdefault(kind, []).append(action)
        deleted += deletions or 0
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


def blocked_for(report: RiskReport) -> dict[str, object]:
    """The BLOCKED section (`policies.outcome.BlockedResult`'s shape) for a risk report."""
    actions = [action for reason in report.reasons for action in reason.actions]
    subject = "The request asks to" if report.source == "request" else "This fix would"
    why = [
        f"- {_listed(reason.actions, _LISTED_WHY)}: {_WHY[reason.kind]}."
        for reason in report.reasons
    ]
    options = [OPTION_PATCH, OPTION_NARROW, OPTION_STOP]
    if report.pushable:
        options.insert(0, OPTION_PROCEED)
    else:
        why.append("- So the app cannot push this change; it can attach it as a patch.")
    return {
        "decision": f"{subject} {_listed(actions)}. Should it go ahead?",
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
