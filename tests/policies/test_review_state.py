"""policies.review_state: fingerprints, repeats, dismissals, the marker."""

from __future__ import annotations

import base64
import hashlib
import hmac
import zlib

import pytest

from policies.review_state import (
    MARKER_MAX_CHARS,
    Candidate,
    ReviewState,
    StoredFinding,
    ThreadFacts,
    code_hash,
    counts,
    decode_marker,
    dismissal_reason,
    dismissers,
    encode_marker,
    fingerprint,
    known_finding,
    legacy_patch_signature,
    merge_status,
    patch_signature,
    unchanged_files,
    with_heads,
    writers_of,
)

BOT = "repo-bot[bot]"
KEY = b"k" * 32
WHERE = {"key": KEY, "repo": "octo/hello", "number": 1}
WRITERS = frozenset({"alice", "bob", "carol"})


def stored(c: Candidate, **kw: object) -> StoredFinding:
    return StoredFinding(
        fingerprint=c.fingerprint,
        path=c.path,
        line=c.line,
        code=code_hash(c.code),
        category=c.category,
        title=c.title,
        **kw,  # type: ignore[arg-type]
    )


CAND = Candidate("app.py", 10, None, "x = eval(data)", "security", "Use of eval on input")


def test_fingerprint_ignores_whitespace_and_case_of_title() -> None:
    a = fingerprint("a.py", "x =  1\n  y", "bug", "Off by one!")
    b = fingerprint("a.py", "x = 1 y", "bug", "off by ONE")
    assert a == b
    assert a != fingerprint("a.py", "x = 2 y", "bug", "off by one")
    assert a != fingerprint("b.py", "x = 1 y", "bug", "off by one")


@pytest.mark.parametrize(
    ("cand", "found"),
    [
        pytest.param(CAND, True, id="same"),
        pytest.param(
            Candidate("app.py", 40, None, "x = eval(data)", "security", "Use of eval on the input"),
            True,
            id="moved-and-reworded",
        ),
        pytest.param(
            Candidate("app.py", 12, None, "y = eval(z)", "security", "eval used on input"),
            True,
            id="nearby-lines-reworded",
        ),
        pytest.param(
            Candidate("app.py", 90, None, "other()", "security", "Use of eval on input data"),
            False,
            id="far-and-other-code",
        ),
        pytest.param(
            Candidate("app.py", 10, None, "x = eval(data)", "style", "Use of eval on input"),
            False,
            id="other-category",
        ),
        pytest.param(
            Candidate("app.py", 10, None, "x = eval(data)", "security", "Missing docstring"),
            False,
            id="other-title",
        ),
        pytest.param(
            Candidate("lib.py", 10, None, "x = eval(data)", "security", "Use of eval on input"),
            False,
            id="other-path",
        ),
    ],
)
def test_known_finding(cand: Candidate, found: bool) -> None:
    state = ReviewState(findings=[stored(CAND, status="dismissed")])
    assert (known_finding(state, cand) is not None) is found


def test_patch_signature_ignores_line_numbers() -> None:
    a = "@@ -1,2 +1,3 @@\n a\n+b\n c"
    b = "@@ -10,2 +12,3 @@ def f():\n a\n+b\n c"
    assert patch_signature(a) == patch_signature(b)
    assert patch_signature(a) != patch_signature(a.replace("+b", "+B"))
    assert unchanged_files({"x": "1", "y": "2"}, {"x": "1", "y": "3", "z": "4"}) == {"x"}


def test_patch_signature_holds_when_the_base_changed_lines_next_to_the_change() -> None:
    # A merge of the base branch (or a rebase) that changed a context line: the pull
    # request's own lines are the same, so its patch is.
    before = "@@ -1,3 +1,4 @@\n a\n+b\n c\n d"
    after = "@@ -1,3 +1,4 @@\n A\n+b\n c\n d"
    assert patch_signature(before) == patch_signature(after)
    assert patch_signature(before) != patch_signature(before.replace(" c", "-c"))


def test_a_signature_stored_before_context_was_left_out_still_matches() -> None:
    patch = "@@ -1,2 +1,3 @@\n a\n+b\n c"
    stored = {"x": legacy_patch_signature(patch), "y": "0" * 20}
    current = {"x": patch_signature(patch), "y": patch_signature(patch)}
    legacy = {"x": legacy_patch_signature(patch), "y": legacy_patch_signature(patch)}
    assert unchanged_files(stored, current, legacy=legacy) == {"x"}


@pytest.mark.parametrize(
    ("thread", "reason"),
    [
        pytest.param(
            ThreadFacts("T", True, "alice", False, ()), "thread resolved by @alice", id="resolved"
        ),
        pytest.param(ThreadFacts("T", True, BOT, False, ()), None, id="resolved-by-us"),
        pytest.param(ThreadFacts("T", True, "repo-bot", False, ()), None, id="us-in-graphql"),
        pytest.param(
            ThreadFacts("T", False, None, False, (("bob", "We won't fix this, it's on purpose"),)),
            "@bob answered that it will not be fixed",
            id="wont-fix",
        ),
        pytest.param(
            ThreadFacts("T", False, None, False, (("bob", "Good catch, fixing"),)),
            None,
            id="agrees",
        ),
        pytest.param(
            ThreadFacts("T", False, None, False, (("ci-bot[bot]", "false positive"),)),
            None,
            id="other-bot-ignored",
        ),
        pytest.param(
            ThreadFacts("T", False, None, False, (), ("carol",)), "@carol reacted 👎", id="thumbs"
        ),
        pytest.param(ThreadFacts("T", False, None, True, ()), None, id="outdated-only"),
        pytest.param(
            ThreadFacts("T", True, "Alice", False, ()), "thread resolved by @Alice", id="case"
        ),
    ],
)
def test_dismissal_reason(thread: ThreadFacts, reason: str | None) -> None:
    assert dismissal_reason(thread, BOT, WRITERS) == reason


@pytest.mark.parametrize(
    "thread",
    [
        pytest.param(ThreadFacts("T", True, "mallory", False, ()), id="resolved"),
        pytest.param(
            ThreadFacts("T", False, None, False, (("mallory", "false positive"),)), id="reply"
        ),
        pytest.param(ThreadFacts("T", False, None, False, (), ("mallory",)), id="thumbs"),
        pytest.param(
            ThreadFacts("T", True, "mallory", False, (("mallory", "won't fix"),), ("mallory",)),
            id="all-three",
        ),
    ],
)
def test_only_writers_dismiss(thread: ThreadFacts) -> None:
    """A pull request's author (or anyone) without write permission clears nothing."""
    assert dismissal_reason(thread, BOT, WRITERS) is None
    assert dismissal_reason(thread, BOT, frozenset()) is None
    assert dismissal_reason(thread, BOT, {"mallory"}) is not None


def test_dismissers_are_the_people_whose_permission_matters() -> None:
    thread = ThreadFacts(
        "T",
        True,
        "Alice",
        False,
        (("bob", "false positive"), ("dave", "thanks"), (BOT, "won't fix")),
        ("carol", "alice", "ci[bot]"),
    )
    assert dismissers(thread, BOT) == ["Alice", "bob", "carol"]
    assert dismissers(ThreadFacts("T", False, "x", False, ()), BOT) == []
    perms = {"Alice": "admin", "bob": "maintain", "carol": "triage", "dave": None, "e": "write"}
    assert writers_of(perms) == {"alice", "bob", "e"}


def test_marker_round_trip_and_garbage() -> None:
    state = with_heads(ReviewState(findings=[stored(CAND)]), "b" * 40, "h" * 40, {"app.py": "s"})
    body = "Summary\n\n" + encode_marker(state, **WHERE)
    assert decode_marker(body, **WHERE) == state
    assert decode_marker(body + "\n", **WHERE) == state  # GitHub may trim or keep line ends
    assert decode_marker(None, **WHERE) is None
    assert decode_marker("no marker", **WHERE) is None
    assert decode_marker("<!-- bot:review-state !!! -->", **WHERE) is None
    assert decode_marker("<!-- bot:review-state abc", **WHERE) is None
    bomb = base64.b64encode(zlib.compress(b"[" * 10_000_000)).decode()
    signed = _mac_of(bomb)
    assert decode_marker(f"<!-- bot:review-state {signed} {bomb} -->", **WHERE) is None


def _mac_of(text: str, key: bytes = KEY, repo: str = "octo/hello", number: int = 1) -> str:
    message = b"\0".join([b"bot:review-state:v2", repo.encode(), str(number).encode()])
    return hmac.new(key, message + b"\0" + text.encode(), hashlib.sha256).hexdigest()


def _unsigned(state: ReviewState) -> str:
    raw = state.model_dump_json(exclude_defaults=True).encode()
    return base64.b64encode(zlib.compress(raw, 9)).decode()


def test_a_forged_or_misplaced_marker_is_never_read() -> None:
    real = encode_marker(ReviewState(heads=["a" * 40]), **WHERE)
    forged = _unsigned(ReviewState(paused=True))
    # The format before signatures, as anyone can write it.
    assert decode_marker(f"Summary\n<!-- bot:review-state {forged} -->", **WHERE) is None
    # A signature made up without the key.
    assert decode_marker(f"x\n<!-- bot:review-state {'0' * 64} {forged} -->", **WHERE) is None
    assert decode_marker(f"x\n{real.replace(real[22:30], '00000000')}", **WHERE) is None
    # A real marker anywhere but on the last line: quoted in a file list, then more text.
    assert decode_marker(f"- `{real}`\n\nFooter", **WHERE) is None
    assert decode_marker(f"{real}\nmore", **WHERE) is None
    assert decode_marker(f"- `x` {real}", **WHERE) is None
    # A real marker of another pull request, repository, or with another key.
    assert decode_marker(real, key=KEY, repo="octo/hello", number=2) is None
    assert decode_marker(real, key=KEY, repo="octo/other", number=1) is None
    assert decode_marker(real, key=b"other", repo="octo/hello", number=1) is None
    assert decode_marker(real, key=KEY, repo="OCTO/Hello", number=1) is not None


def test_the_marker_is_encoded_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """2,500 findings are packed a bounded number of times, not once per dropped finding."""
    import policies.review_state as rs

    packed: list[int] = []
    real = zlib.compress

    def counted(data: bytes, level: int = -1) -> bytes:
        packed.append(len(data))
        return real(data, level)

    monkeypatch.setattr(rs.zlib, "compress", counted)
    many = [
        StoredFinding(
            fingerprint=hashlib.sha256(str(i).encode()).hexdigest()[:20],
            path=f"src/f{i}.py",
            title=hashlib.sha256(str(-i).encode()).hexdigest() * 4,
        )
        for i in range(2500)
    ]
    marker = encode_marker(ReviewState(findings=many), **WHERE)
    assert len(packed) <= 8
    assert len(marker) > MARKER_MAX_CHARS * 0.9  # the cap is used, not wasted
    assert len(marker) <= MARKER_MAX_CHARS + 120
    back = decode_marker(marker, **WHERE)
    assert back is not None and 0 < len(back.findings) < 2500
    assert back.findings == many[-len(back.findings) :]  # the newest kept, in their order


def test_marker_is_capped_dropping_closed_findings_first() -> None:
    many = [
        StoredFinding(
            fingerprint=hashlib.sha256(str(i).encode()).hexdigest()[:20],
            path=f"f{i}.py",
            title=hashlib.sha256(str(-i).encode()).hexdigest() * 4,
        )
        for i in range(2000)
    ]
    many[0] = many[0].model_copy(update={"status": "fixed"})
    marker = encode_marker(ReviewState(findings=many), **WHERE)
    assert len(marker) <= MARKER_MAX_CHARS + 120
    back = decode_marker(marker, **WHERE)
    assert back is not None and 0 < len(back.findings) < 2000
    assert all(f.status == "open" for f in back.findings)


def test_with_heads_counts_and_merge_status() -> None:
    state = with_heads(ReviewState(heads=["a", "b"]), "base", "a", {})
    assert state.heads == ["b", "a"] and state.last_head == "a"
    other = Candidate("b.py", 1, None, "z", "bug", "Crash")
    state = state.model_copy(update={"findings": [stored(CAND), stored(other, status="fixed")]})
    assert counts(state, [CAND.fingerprint]) == {"new": 1, "open": 0, "fixed": 1, "dismissed": 0}
    merged = merge_status(
        state.findings,
        {CAND.fingerprint: ("fixed", "Fixed in abc"), other.fingerprint: ("open", "")},
    )
    assert [f.status for f in merged] == ["fixed", "open"]
    dismissed = [merged[0].model_copy(update={"status": "dismissed"})]
    assert merge_status(dismissed, {CAND.fingerprint: ("open", "")})[0].status == "dismissed"
    assert ReviewState().last_head is None
