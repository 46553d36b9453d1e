"""What the app remembers of a pull request's reviews, and the pure rules that use it.

The state (`ReviewState`) holds the heads reviewed, each file's patch signature at the last
review, and every finding with a stable fingerprint and its status: `open`, `fixed` (the
code changed and a verifier found the problem gone) or `dismissed` (a person resolved its
thread, answered that it will not be fixed, or reacted 👎, and that person may write to the
repository). It lives in the store and is mirrored as the last line of the PR's sticky summary
(`encode_marker` / `decode_marker`), so a new database recovers it from GitHub. That line
carries an HMAC over the state, the repository and the pull request's number, keyed by a
secret only the app holds: a marker anyone else wrote (in a file name, a question, their own
comment) or one copied from another pull request does not verify and is never read.

A finding's fingerprint is its path, the normalized code of the lines it anchors to, its
category and its normalized title: it survives line moves, and changes when the code does.
`known_finding` also catches a model re-wording the same point (same path and category, the
same code or nearby lines, and mostly the same title words), because raising a point twice is
the failure people notice most.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import zlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from policies.triggers import WRITE_PERMISSIONS

FindingStatus = Literal["open", "fixed", "dismissed"]
MARKER_PREFIX = "<!-- bot:review-state "
MARKER_SUFFIX = " -->"
MARKER_MAX_CHARS = 40_000
_MARKER_LINE = re.compile(r"<!-- bot:review-state ([0-9a-f]{64}) ([A-Za-z0-9+/]+=*) -->")
_MAC_LABEL = b"bot:review-state:v2"
MAX_HEADS = 50
FIT_PASSES = 6
NEAR_LINES = 3
TITLE_OVERLAP = 0.6

_WORD = re.compile(r"[a-z0-9_]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "is",
        "are",
        "be",
        "may",
        "can",
        "could",
        "this",
        "that",
        "it",
        "its",
    ]
)
_WONT_FIX = re.compile(
    r"\b(?:won'?t|will not|not going to|don'?t|do not) (?:be )?fix|\bwontfix\b|\bby design\b|"
    r"\bintended\b|\bintentional\b|\bfalse positive\b|\bnot a (?:bug|problem|issue)\b|"
    r"\bworks as intended\b|\bignore (?:this|it)\b",
    re.IGNORECASE,
)


class StoredFinding(BaseModel):
    """One finding the app raised on this pull request, and what became of it."""

    model_config = ConfigDict(extra="ignore")

    fingerprint: str = Field(min_length=1, max_length=64)
    path: str = Field(max_length=4096)
    line: int | None = Field(default=None, ge=1)
    start_line: int | None = Field(default=None, ge=1)
    code: str = Field(default="", max_length=64)  # hash of the normalized anchored code
    severity: str = Field(default="medium", max_length=16)
    category: str = Field(default="other", max_length=40)
    title: str = Field(default="", max_length=300)
    status: FindingStatus = "open"
    head: str = Field(default="", max_length=64)
    comment_id: int | None = None
    thread_id: str | None = Field(default=None, max_length=128)
    resolution: str | None = Field(default=None, max_length=300)


class ReviewState(BaseModel):
    """A pull request's review memory."""

    model_config = ConfigDict(extra="ignore")

    version: Literal[1] = 1
    base: str | None = None
    heads: list[str] = Field(default_factory=list)
    patches: dict[str, str] = Field(default_factory=dict)
    findings: list[StoredFinding] = Field(default_factory=list)
    paused: bool = False
    units: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    """Verified findings of units a superseded run finished, by unit key (a hash of the
    unit's files and changes): the next run reuses those whose changes are the same."""
    summary: str = Field(default="", max_length=6000)
    """The advisor's last summary of the pull request, shown again by a follow-up review
    that found nothing new (it makes no advisor call)."""
    proofs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """The outcomes of the last reviewed head's proofs (`policies.proofs`), by proof key (the
    head, the finding, the test command): a review that meets the same key reuses one."""

    @property
    def last_head(self) -> str | None:
        return self.heads[-1] if self.heads else None


def normalize_code(text: str) -> str:
    """Code with its whitespace collapsed: indentation and line wrapping do not count."""
    return " ".join(text.split())


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 2:
            return word[: -len(suffix)]
    return word


def normalize_title(title: str) -> str:
    """Lower-case words without filler words and common endings: `Uses eval` ~ `use eval`."""
    return " ".join(_stem(w) for w in _WORD.findall(title.lower()) if w not in _STOP)


def code_hash(code: str) -> str:
    return hashlib.sha256(normalize_code(code).encode("utf-8")).hexdigest()[:16]


def fingerprint(path: str, code: str, category: str, title: str) -> str:
    """The stable id of a finding: path, normalized anchored code, category, normalized title."""
    key = "\n".join(
        [path.strip(), normalize_code(code), category.strip().lower(), normalize_title(title)]
    )
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


def _overlap(a: str, b: str) -> float:
    wa, wb = set(normalize_title(a).split()), set(normalize_title(b).split())
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A verified finding of this run, before it is compared with what was raised before."""

    path: str
    line: int | None
    start_line: int | None
    code: str
    category: str
    title: str

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.path, self.code, self.category, self.title)


def known_finding(state: ReviewState, cand: Candidate) -> StoredFinding | None:
    """The finding raised before that `cand` repeats (any status), or None when it is new."""
    fp = cand.fingerprint
    chash = code_hash(cand.code) if cand.code.strip() else ""
    for old in state.findings:
        if old.fingerprint == fp:
            return old
    for old in state.findings:
        if old.path != cand.path or old.category != cand.category.strip().lower():
            continue
        same_code = bool(chash) and old.code == chash
        near = (
            old.line is not None
            and cand.line is not None
            and abs(old.line - cand.line) <= NEAR_LINES
        )
        if (same_code or near) and _overlap(old.title, cand.title) >= TITLE_OVERLAP:
            return old
    return None


def patch_signature(patch: str) -> str:
    """A file's patch as its added and removed lines alone: equal when the pull request's
    own change is, even if the base moved under it (a merge of the base branch into the pull
    request or a rebase), also when the base changed the lines next to the change."""
    lines = [line for line in patch.split("\n") if line.startswith(("+", "-"))]
    return hashlib.sha256("\0".join(["v2", *lines]).encode("utf-8")).hexdigest()[:20]


def legacy_patch_signature(patch: str) -> str:
    """The signature reviews stored before `patch_signature` left out the context lines
    (the hunks without their line numbers), so their files still count as unchanged."""
    lines = [
        line
        for line in patch.split("\n")
        if not line.startswith("@@") and not line.startswith("\\")
    ]
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:20]


def unchanged_files(
    previous: Mapping[str, str],
    current: Mapping[str, str],
    *,
    legacy: Mapping[str, str] | None = None,
) -> frozenset[str]:
    """Files whose patch signature is the same as at the last review (or, for a review
    stored before, the same as its `legacy` signature)."""
    older = legacy or {}
    return frozenset(
        p
        for p, sig in current.items()
        if previous.get(p) is not None and previous.get(p) in (sig, older.get(p))
    )


@dataclass(frozen=True, slots=True)
class ThreadFacts:
    """What GitHub says of one review thread of ours."""

    thread_id: str
    resolved: bool
    resolved_by: str | None
    outdated: bool
    replies: tuple[tuple[str, str], ...]  # (author login, body), after our first comment
    thumbs_down_by: tuple[str, ...] = ()


def _is_bot(login: str | None, bot_login: str) -> bool:
    """GraphQL names an App's account without the `[bot]` suffix that REST shows."""
    if not login:
        return False
    name = login.lower()
    return name.endswith("[bot]") or name == bot_login.lower().removesuffix("[bot]")


def dismissers(thread: ThreadFacts, bot_login: str) -> list[str]:
    """Everyone whose act on this thread would dismiss the finding if they may write to the
    repository: who resolved it, who answered "won't fix", who reacted 👎 (no bots, each once).
    The caller reads their permissions; `dismissal_reason` then counts only the writers."""
    seen: dict[str, str] = {}
    acts: list[str | None] = [thread.resolved_by if thread.resolved else None]
    acts += [author for author, body in thread.replies if _WONT_FIX.search(body)]
    acts += list(thread.thumbs_down_by)
    for login in acts:
        if login and not _is_bot(login, bot_login):
            seen.setdefault(login.lower(), login)
    return list(seen.values())


def writers_of(permissions: Mapping[str, str | None]) -> frozenset[str]:
    """The lower-case logins whose permission (as GitHub answered it) is write, maintain or
    admin; an unreadable permission (None) counts as none."""
    return frozenset(
        login.lower() for login, perm in permissions.items() if perm in WRITE_PERMISSIONS
    )


def says_wont_fix(text: str) -> bool:
    """Whether a reply reads as declining a finding ("intentional", "won't fix", "by design")."""
    return _WONT_FIX.search(text) is not None


def dismissal_reason(thread: ThreadFacts, bot_login: str, writers: Collection[str]) -> str | None:
    """Why a person dismissed our finding, or None while nobody who may do so has.

    Only people with write, maintain or admin permission (`writers`, lower-case logins)
    dismiss: a pull request's author without it cannot clear the findings that fail the
    review check by resolving, declining or 👎-ing them. What others wrote stays in the
    thread, which reaches the model only as untrusted data."""

    def writer(login: str | None) -> bool:
        if not login or _is_bot(login, bot_login):
            return False
        return login.lower() in writers

    if thread.resolved and writer(thread.resolved_by):
        return f"thread resolved by @{thread.resolved_by}"
    for author, body in thread.replies:
        if writer(author) and _WONT_FIX.search(body):
            return f"@{author} answered that it will not be fixed"
    people = [login for login in thread.thumbs_down_by if writer(login)]
    if people:
        return f"@{people[0]} reacted 👎"
    return None


def with_heads(state: ReviewState, base: str, head: str, patches: Mapping[str, str]) -> ReviewState:
    """The state after reviewing `head`: the head appended, the patch signatures replaced."""
    heads = [h for h in state.heads if h != head] + [head]
    return state.model_copy(
        update={"base": base, "heads": heads[-MAX_HEADS:], "patches": dict(patches)}
    )


def counts(state: ReviewState, new: Iterable[str]) -> dict[str, int]:
    """`new` / `open` (still open, not new) / `fixed` / `dismissed`, for the summary."""
    fresh = set(new)
    out = {"new": 0, "open": 0, "fixed": 0, "dismissed": 0}
    for f in state.findings:
        if f.status == "open":
            out["new" if f.fingerprint in fresh else "open"] += 1
        else:
            out[f.status] += 1
    return out


def state_key(material: bytes) -> bytes:
    """The key that signs the mirrored state, derived from (never equal to) a secret of the
    app's own, so the marker reveals nothing of it and no other use of it can forge one."""
    return hmac.new(material, b"bot review-state key v2", hashlib.sha256).digest()


def _mac(key: bytes, repo: str, number: int, text: str) -> str:
    message = b"\0".join([_MAC_LABEL, repo.lower().encode(), str(number).encode(), text.encode()])
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def _pack(state: ReviewState) -> str:
    raw = state.model_dump_json(exclude_defaults=True).encode("utf-8")
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def _fitting(state: ReviewState, limit: int, size: int) -> str:
    """The packed state with the oldest closed findings, then the oldest open ones, dropped
    until it is at most `limit` characters (`size`: the packed size of all of it), in time
    linear in the state's size.

    The packed size grows about in proportion to the findings kept, so each pass guesses the
    count that fills the limit from the last pass's size and packs that once; a handful of
    passes (`FIT_PASSES`) land within a few percent of the limit. Dropping one finding at a
    time and packing again would be quadratic: a big pull request's memory stalled the
    worker for many seconds."""
    findings = state.findings
    drop_order = [i for i, f in enumerate(findings) if f.status != "open"]
    drop_order += [i for i, f in enumerate(findings) if f.status == "open"]
    keep_order = drop_order[::-1]

    def packed(count: int) -> str:
        kept = sorted(keep_order[:count])
        return _pack(state.model_copy(update={"findings": [findings[i] for i in kept]}))

    low, high = 0, len(findings)  # `low` findings fit, `high` do not
    best: str | None = None
    count = high
    for _ in range(FIT_PASSES):
        if high - low <= 1:
            break
        guess = min(max(int(count * limit / size * 0.97), low + 1), high - 1)
        text = packed(guess)
        if len(text) <= limit:
            low, best = guess, text
            if len(text) >= limit * 0.97:
                break
        else:
            high = guess
        count, size = guess, len(text)
    return best if best is not None else packed(low)


def encode_marker(state: ReviewState, *, key: bytes, repo: str, number: int) -> str:
    """The hidden line that mirrors the state at the end of the sticky summary, signed for
    this repository and pull request, within a size cap (see `_fitting`). Linear in the
    state's size; still, a big state takes a while, so callers run it off the event loop."""
    text = _pack(state)
    if len(text) > MARKER_MAX_CHARS and state.findings:
        text = _fitting(state, MARKER_MAX_CHARS, len(text))
    return f"{MARKER_PREFIX}{_mac(key, repo, number, text)} {text}{MARKER_SUFFIX}"


def mentions_marker(text: str | None) -> bool:
    """Whether `text` holds anything that looks like a review-state marker."""
    return text is not None and "bot:review-state" in text


def decode_marker(body: str | None, *, key: bytes, repo: str, number: int) -> ReviewState | None:
    """The state on the last line of a sticky summary, when it is a marker the app signed for
    this repository and pull request; None otherwise (no marker there, a marker anywhere
    else in the body, a bad signature, an unreadable state)."""
    if not body:
        return None
    last = body.rstrip().rsplit("\n", 1)[-1].strip()
    match = _MARKER_LINE.fullmatch(last)
    if match is None:
        return None
    mac, text = match.group(1), match.group(2)
    if len(text) > MARKER_MAX_CHARS * 2:
        return None
    if not hmac.compare_digest(mac, _mac(key, repo, number, text)):
        return None
    try:
        raw = zlib.decompressobj().decompress(base64.b64decode(text, validate=True), 4_000_000)
        return ReviewState.model_validate_json(raw)
    except (binascii.Error, zlib.error, ValidationError, ValueError):
        return None


def merge_status(
    findings: Sequence[StoredFinding], updates: Mapping[str, tuple[FindingStatus, str]]
) -> list[StoredFinding]:
    """Findings with new statuses applied: `{fingerprint: (status, resolution)}`."""
    out = []
    for f in findings:
        change = updates.get(f.fingerprint)
        if change is None or f.status == "dismissed":
            out.append(f)
        else:
            out.append(f.model_copy(update={"status": change[0], "resolution": change[1]}))
    return out
