"""Who may sign in to the operator's page with GitHub, decided without I/O.

BOT_UI_ALLOW is a comma-separated list of rules, any one of which lets a person in:

- `org:NAME`: an active member of the organization NAME;
- `team:ORG/SLUG`: an active member (or maintainer) of that team;
- `repo-admins`: an admin of any repository the App is installed on.

Names are compared as GitHub compares them, without regard to case. The checks themselves are
GitHub calls (`bot.github.oauth`); which rule let a session in is kept with it (`grant`), so
the same rule is asked again while the session lasts, and a person taken off the team, out of
the organization or off the repository is refused at the next check.

The sign-in's `state` and the public address the callback must come back to are decided here
too: the state is one random value per sign-in attempt, kept in the store until it is used
once, and the callback URL is the configured BOT_UI_URL's, never the request's Host header.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CALLBACK_PATH",
    "STATE_SECONDS",
    "Rule",
    "callback_url",
    "grant_of",
    "parse_allow",
    "parse_grant",
    "public_origin",
    "state_shape",
]

CALLBACK_PATH = "/ui/oauth/callback"
STATE_SECONDS = 600
"""How long a sign-in attempt may take between leaving for GitHub and coming back."""

_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
_SLUG = re.compile(r"[A-Za-z0-9_.-]{1,100}")
_REPO = re.compile(r"[A-Za-z0-9-]{1,39}/[A-Za-z0-9_.-]{1,100}")
_STATE = re.compile(r"[0-9a-f]{32}")
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)(.*)", re.DOTALL)
_HOST = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::[0-9]{1,5})?")
_FORMS = "use org:NAME, team:ORG/TEAM-SLUG or repo-admins, separated by commas"


@dataclass(frozen=True, slots=True)
class Rule:
    kind: Literal["org", "team", "repo-admins"]
    org: str = ""
    team: str = ""

    def __str__(self) -> str:
        if self.kind == "org":
            return f"org:{self.org}"
        if self.kind == "team":
            return f"team:{self.org}/{self.team}"
        return "repo-admins"


def parse_allow(text: str) -> tuple[Rule, ...]:
    """The rules of a BOT_UI_ALLOW value; ValueError naming the entry that is not one."""
    rules: list[Rule] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        kind, _, rest = entry.partition(":")
        kind = kind.strip().lower()
        rest = rest.strip()
        if kind == "org" and _NAME.fullmatch(rest):
            rules.append(Rule("org", org=rest.lower()))
        elif kind == "team" and "/" in rest:
            org, _, team = rest.partition("/")
            if not (_NAME.fullmatch(org) and _SLUG.fullmatch(team)):
                raise ValueError(f"{entry!r} is not a rule: {_FORMS}")
            rules.append(Rule("team", org=org.lower(), team=team.lower()))
        elif entry.lower() == "repo-admins":
            rules.append(Rule("repo-admins"))
        else:
            raise ValueError(f"{entry!r} is not a rule: {_FORMS}")
    if not rules:
        raise ValueError(f"names nobody: {_FORMS}")
    return tuple(dict.fromkeys(rules))


def grant_of(rule: Rule, repo: str | None = None) -> str:
    """What a session keeps of the rule that let it in: the rule, and for `repo-admins` the
    repository whose admin the person is (`repo:owner/name`)."""
    if rule.kind == "repo-admins":
        if repo is None or not _REPO.fullmatch(repo):
            raise ValueError("a repo-admins grant names its repository")
        return f"repo:{repo.lower()}"
    return str(rule)


def parse_grant(grant: str) -> tuple[Rule, str | None] | None:
    """The rule and repository a session's grant holds; None for any other text."""
    if grant.startswith("repo:"):
        repo = grant.removeprefix("repo:")
        return (Rule("repo-admins"), repo) if _REPO.fullmatch(repo) else None
    try:
        [rule] = parse_allow(grant)
    except ValueError:
        return None
    return (rule, None) if rule.kind != "repo-admins" else None


def public_origin(url: str) -> str:
    """BOT_UI_URL as the origin the callback comes back to (`https://host[:port]`);
    ValueError for anything else (a path, a query, credentials, another scheme)."""
    found = _URL.fullmatch(url.strip())
    if found is None:
        raise ValueError("must be the app's public address, such as https://bot.example.com")
    scheme, netloc, rest = found.group(1).lower(), found.group(2), found.group(3)
    if scheme not in ("http", "https") or not netloc:
        raise ValueError("must be the app's public address, such as https://bot.example.com")
    if "@" in netloc or "?" in rest or "#" in rest:
        raise ValueError("must be an address without credentials, query or fragment")
    if rest not in ("", "/"):
        raise ValueError("must be the app's address without a path (the page is under /ui/)")
    if _HOST.fullmatch(netloc) is None:
        raise ValueError("must be the app's public address, such as https://bot.example.com")
    netloc = netloc.lower()
    default = {"http": ":80", "https": ":443"}[scheme]
    if netloc.endswith(default):  # as a browser sends the Host header: without it
        netloc = netloc.removesuffix(default)
    return f"{scheme}://{netloc}"


def callback_url(origin: str) -> str:
    """Where GitHub sends the person back: the App's callback URL to register."""
    return origin + CALLBACK_PATH


def state_shape(value: str | None) -> bool:
    """Whether `value` has the shape of a state the app hands out (32 lower-case hex)."""
    return value is not None and _STATE.fullmatch(value) is not None
