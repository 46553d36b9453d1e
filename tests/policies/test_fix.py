"""policies.fix: risky changes and requests, the BLOCKED decision, branch names, PR text."""

from __future__ import annotations

import re

import pytest

from policies.config import FixConfig
from policies.fix import (
    OPTION_NARROW,
    OPTION_PATCH,
    OPTION_PROCEED,
    OPTION_STOP,
    Change,
    CheckResult,
    ModeChange,
    RiskReason,
    RiskReport,
    asked_for,
    blocked_for,
    branch_name,
    choice_of,
    classify_change,
    co_author_trailer,
    is_fix_branch,
    outstanding,
    pull_request_text,
    request_risk,
    with_trailer,
)
from policies.outcome import AskedRisk, BlockedResult, UsageSummary

CONFIG = FixConfig(protected_paths=["deploy/**", "migrations/"], max_deleted_lines=50)
GITHUB_TOKEN = "ghp_" + "A1b2" * 9
AWS_KEY = "AKIA" + "ABCDEFGHIJKLMNOP"


def m(path: str, added: int = 1, deleted: int = 1) -> Change:
    return ("M", path, None, added, deleted)


def reasons(report: RiskReport | None) -> dict[str, list[str]]:
    return {} if report is None else {r.kind: list(r.actions) for r in report.reasons}


# --- classify_change -----------------------------------------------------------------------

CHANGES = [
    pytest.param([m("src/app.py"), ("A", "tests/test_app.py", None, 20, 0)], {}, id="plain-fix"),
    pytest.param([], {}, id="nothing"),
    pytest.param(
        [m(".github/workflows/ci.yml")],
        {"workflow": ["change `.github/workflows/ci.yml`"]},
        id="workflow-file",
    ),
    pytest.param(
        [("A", ".GitHub/Workflows/new.yml", None, 5, 0)],
        {"workflow": ["add `.GitHub/Workflows/new.yml`"]},
        id="workflow-any-case",
    ),
    pytest.param(
        [("T", ".github", None, 1, 0)],
        {"workflow": ["change the type of `.github`"]},
        id="github-dir-replaced-by-link",
    ),
    pytest.param(
        [("R090", "ci/old.yml", ".github/workflows/old.yml", 0, 0)],
        {"workflow": ["rename `.github/workflows/old.yml` to `ci/old.yml`"]},
        id="workflow-renamed-away",
    ),
    pytest.param(
        [m(".github/dependabot.yml"), m(".github/CODEOWNERS")], {}, id="other-github-files"
    ),
    pytest.param(
        [m("deploy/prod/values.yml"), ("C75", "migrations/0002.sql", "src/q.sql", 3, 0)],
        {
            "protected": [
                "change `deploy/prod/values.yml`",
                "copy `src/q.sql` to `migrations/0002.sql`",
            ]
        },
        id="protected-paths",
    ),
    pytest.param(
        [("D", "src/legacy.py", None, 0, 10)],
        {"deleted_file": ["delete `src/legacy.py`"]},
        id="deleted-file",
    ),
    pytest.param(
        [("D", "img/logo.png", None, None, None)],
        {"deleted_file": ["delete `img/logo.png`"]},
        id="deleted-binary",
    ),
    pytest.param([m("a.py", 0, 30), m("b.py", 0, 20)], {}, id="deleted-lines-at-limit"),
    pytest.param(
        [m("a.py", 0, 30), m("b.py", 0, 21)],
        {"deleted_lines": ["delete 51 lines in total (`fix.max_deleted_lines` is 50)"]},
        id="deleted-lines-over-limit",
    ),
    pytest.param(
        [m("poetry.lock"), m("web/package-lock.json"), m("Cargo.lock")],
        {
            "dependencies": [
                "change `poetry.lock`",
                "change `web/package-lock.json`",
                "change `Cargo.lock`",
            ]
        },
        id="lock-files",
    ),
    pytest.param(
        [
            m("pyproject.toml"),
            m("web/package.json"),
            m("requirements-dev.txt"),
            m("requirements/test.in"),
            m("go.mod"),
            m("Gemfile"),
        ],
        {
            "dependencies": [
                "change `pyproject.toml`",
                "change `web/package.json`",
                "change `requirements-dev.txt`",
                "change `requirements/test.in`",
                "change `go.mod`",
                "change `Gemfile`",
            ]
        },
        id="manifests",
    ),
    pytest.param(
        [m("docs/requirements.md"), m("src/package_json.py")], {}, id="manifest-look-alikes"
    ),
    pytest.param(
        [
            ("A", ".env", None, 2, 0),
            m("config/.env.production"),
            ("A", "certs/server.pem", None, 9, 0),
            ("A", "keys/id_ed25519", None, 1, 0),
            m("config/secrets.yml"),
            m("credentials.json"),
            m("home/.npmrc"),
        ],
        {
            "credentials": [
                "add `.env`",
                "change `config/.env.production`",
                "add `certs/server.pem`",
                "add `keys/id_ed25519`",
                "change `config/secrets.yml`",
                "change `credentials.json`",
                "change `home/.npmrc`",
            ]
        },
        id="credential-paths",
    ),
    pytest.param([m(".env.example"), m("docs/env.md")], {}, id="env-example-is-fine"),
    pytest.param(
        [m(".github/workflows/deploy.yml", 0, 80), ("D", "deploy/run.sh", None, 0, 5)],
        {
            "workflow": ["change `.github/workflows/deploy.yml`"],
            "protected": ["delete `deploy/run.sh`"],
            "deleted_file": ["delete `deploy/run.sh`"],
            "deleted_lines": ["delete 85 lines in total (`fix.max_deleted_lines` is 50)"],
        },
        id="several-reasons-in-order",
    ),
    pytest.param(
        [m("src/a`b.py"), ("D", "x\ny.py", None, 0, 1)],
        {"deleted_file": ["delete `x y.py`"]},
        id="odd-names-stay-one-code-span",
    ),
]


@pytest.mark.parametrize(("changes", "expected"), CHANGES)
def test_classify_change(changes: list[Change], expected: dict[str, list[str]]) -> None:
    assert reasons(classify_change(changes, CONFIG)) == expected


ADDED = [
    pytest.param(f"token = '{GITHUB_TOKEN}'", "add a GitHub token to `src/x.py`", id="github"),
    pytest.param(
        "github_pat_" + "x" * 30, "add a GitHub token to `src/x.py`", id="fine-grained-pat"
    ),
    pytest.param(f"KEY={AWS_KEY}", "add an AWS access key to `src/x.py`", id="aws"),
    pytest.param(
        "-----BEGIN OPENSSH PRIVATE KEY-----", "add a private key to `src/x.py`", id="pem"
    ),
    pytest.param("xoxb-1234567890-abc", "add a Slack token to `src/x.py`", id="slack"),
    pytest.param("glpat-" + "a" * 20, "add a GitLab token to `src/x.py`", id="gitlab"),
    pytest.param("AIza" + "b" * 35, "add a Google API key to `src/x.py`", id="google"),
    pytest.param("sk-ant-" + "c" * 30, "add an API key to `src/x.py`", id="model-api-key"),
    pytest.param(
        'password = "hunter2hunter2"', "add a hard-coded secret to `src/x.py`", id="assignment"
    ),
    pytest.param(
        '"apiKey": "0123456789abcdef"', "add a hard-coded secret to `src/x.py`", id="json"
    ),
]


@pytest.mark.parametrize(("text", "action"), ADDED)
def test_added_lines_that_look_like_secrets(text: str, action: str) -> None:
    report = classify_change([m("src/x.py")], CONFIG, {"src/x.py": f"x = 1\n{text}\n"})
    assert reasons(report) == {"credentials": [action]}


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('password = os.environ["DB_PASSWORD"]', id="read-from-env"),
        pytest.param("password = ''", id="empty"),
        pytest.param("def check_token(token: str) -> bool:", id="word-token"),
        pytest.param("ghp_short", id="short-prefix"),
    ],
)
def test_added_lines_without_secrets(text: str) -> None:
    assert classify_change([m("src/x.py")], CONFIG, {"src/x.py": text}) is None


def test_secret_is_never_quoted_in_the_decision() -> None:
    report = classify_change([m("a.py")], CONFIG, {"a.py": f"t = '{GITHUB_TOKEN}'\n{AWS_KEY}"})
    assert report is not None
    blocked = blocked_for(report)
    assert GITHUB_TOKEN not in str(blocked) and AWS_KEY not in str(blocked)
    assert reasons(report)["credentials"] == [
        "add a GitHub token to `a.py`",
        "add an AWS access key to `a.py`",
    ]


def test_default_config_limits() -> None:
    changes = [m("a.py", 0, 200)]
    assert classify_change(changes, FixConfig()) is None
    assert classify_change([m("a.py", 0, 201)], FixConfig()) is not None
    assert classify_change([m("deploy/x.yml")], FixConfig()) is None


# --- request_risk ---------------------------------------------------------------------------

REQUESTS = [
    pytest.param("fix the crash in src/app.py when the list is empty", {}, id="plain"),
    pytest.param("", {}, id="empty"),
    pytest.param(
        "update .github/workflows/ci.yml to use Python 3.12.",
        {"workflow": ["change `.github/workflows/ci.yml`"]},
        id="workflow-file",
    ),
    pytest.param(
        "add a job to the .github/workflows directory",
        {"workflow": ["change `.github/workflows`"]},
        id="workflow-directory",
    ),
    pytest.param(
        "edit `.GITHUB\\workflows\\release.yml`",
        {"workflow": ["change `.GITHUB\\workflows\\release.yml`"]},
        id="workflow-backslashes-any-case",
    ),
    pytest.param(
        "regenerate poetry.lock and web/yarn.lock",
        {"dependencies": ["rewrite `poetry.lock`", "rewrite `web/yarn.lock`"]},
        id="lock-files",
    ),
    pytest.param("bump the version in package.json", {}, id="manifest-judged-on-the-change"),
    pytest.param(
        "put the key in ./config/.env and certs/tls.key.",
        {"credentials": ["change `config/.env`", "change `certs/tls.key`"]},
        id="credential-paths",
    ),
    pytest.param("rotate id_rsa", {"credentials": ["change `id_rsa`"]}, id="ssh-key-name"),
    pytest.param(
        "fix the credentials check and the secrets page", {}, id="credential-words-not-paths"
    ),
    pytest.param(
        "change deploy/prod.yml and migrations/0001.sql",
        {"protected": ["change `deploy/prod.yml`", "change `migrations/0001.sql`"]},
        id="protected-paths",
    ),
    pytest.param("... --- ///", {}, id="punctuation-only"),
]


@pytest.mark.parametrize(("text", "expected"), REQUESTS)
def test_request_risk(text: str, expected: dict[str, list[str]]) -> None:
    report = request_risk(text, CONFIG)
    assert reasons(report) == expected
    assert report is None or report.source == "request"


def test_request_risk_without_config_ignores_protected_paths() -> None:
    assert request_risk("change deploy/prod.yml") is None


def test_request_risk_is_linear_on_hostile_text() -> None:
    text = "." * 200_000 + "a" + "-" * 200_000 + ".github/workflows" * 1000
    report = request_risk(text, CONFIG)
    assert report is not None and report.kinds == {"workflow"}


# --- blocked_for ----------------------------------------------------------------------------


def test_blocked_for_a_workflow_change_offers_no_push() -> None:
    report = classify_change([m(".github/workflows/ci.yml")], CONFIG)
    assert report is not None and not report.pushable
    blocked = blocked_for(report)
    BlockedResult.model_validate(blocked)
    assert blocked["decision"] == (
        "This fix would change `.github/workflows/ci.yml`. Should it go ahead?"
    )
    assert blocked["options"] == [OPTION_PATCH, OPTION_NARROW, OPTION_STOP]
    assert blocked["default"] == OPTION_STOP
    assert "no `workflows` permission" in str(blocked["why"])
    assert "cannot push" in str(blocked["why"])
    assert blocked["risk"] == "CI could run changed code with the repository's secrets."


def test_blocked_for_a_pushable_change_lists_every_action() -> None:
    changes = [("D", f"old/{i}.py", None, 0, 20) for i in range(7)]
    report = classify_change(changes, CONFIG)
    assert report is not None and report.pushable
    assert report.kinds == {"deleted_file", "deleted_lines"}
    blocked = blocked_for(report)
    BlockedResult.model_validate(blocked)
    assert blocked["options"] == [OPTION_PROCEED, OPTION_PATCH, OPTION_NARROW, OPTION_STOP]
    assert blocked["decision"] == (
        "This fix would delete `old/0.py`, delete `old/1.py`, delete `old/2.py`, "
        "delete `old/3.py`, delete `old/4.py` and 3 more. Should it go ahead?"
    )
    why = str(blocked["why"]).splitlines()
    assert why[0] == (
        "- " + ", ".join(f"delete `old/{i}.py`" for i in range(6)) + " and delete `old/6.py`: "
        "deleting files cannot be reviewed line by line, and what is gone is easy to miss."
    )
    assert why[1].startswith("- delete 140 lines in total (`fix.max_deleted_lines` is 50): ")
    assert blocked["risk"] == "Code or data still in use could be removed. " + (
        "Code still in use could be removed."
    )


def test_blocked_for_a_request_says_it_was_asked() -> None:
    report = request_risk("please edit .github/workflows/ci.yml")
    assert report is not None
    assert blocked_for(report)["decision"] == (
        "The request asks to change `.github/workflows/ci.yml`. Should it go ahead?"
    )


# --- what a report asks to approve ---------------------------------------------------------


DEPS = AskedRisk("dependencies", "change `package.json`")
PROD = AskedRisk("protected", "change `deploy/prod.sh`")
GONE = AskedRisk("deleted_file", "delete `OLD.md`")


def test_asked_for_records_every_risk_and_the_options_that_approve_them() -> None:
    report = classify_change([m("package.json"), m("deploy/prod.sh")], CONFIG)
    assert report is not None
    asked = asked_for(report)
    assert asked.risks == (PROD, DEPS)
    assert asked.approving == (OPTION_PROCEED, OPTION_PATCH)
    assert set(asked.approving) <= set(blocked_for(report)["options"])  # type: ignore[arg-type]


def test_asked_for_a_change_that_cannot_be_pushed_approves_only_by_patch() -> None:
    report = classify_change([m(".github/workflows/ci.yml")], CONFIG)
    assert report is not None
    assert asked_for(report).approving == (OPTION_PATCH,)


def test_outstanding_is_what_the_approval_does_not_cover() -> None:
    changes = [m("package.json"), m("deploy/prod.sh"), ("D", "OLD.md", None, 0, 1)]
    report = classify_change(changes, CONFIG)
    assert report is not None
    assert outstanding(report, frozenset(asked_for(report).risks)) is None
    left = outstanding(report, {DEPS})
    assert left is not None
    assert {(r.kind, r.actions) for r in left.reasons} == {
        ("protected", ("change `deploy/prod.sh`",)),
        ("deleted_file", ("delete `OLD.md`",)),
    }
    assert outstanding(report, frozenset()) == report


def test_approving_a_change_of_a_file_does_not_approve_deleting_it() -> None:
    modified = classify_change([m("deploy/prod.sh")], CONFIG)
    deleted = classify_change([("D", "deploy/prod.sh", None, 0, 2)], CONFIG)
    assert modified is not None and deleted is not None
    left = outstanding(deleted, frozenset(asked_for(modified).risks))
    assert left is not None and left.kinds == {"protected", "deleted_file"}


def test_outstanding_compares_any_kind_by_its_words() -> None:
    moved = RiskReason("submodule", ("move `vendor/lib` from `a1` to `b2`",))  # type: ignore[arg-type]
    report = RiskReport((moved,))
    assert outstanding(report, {AskedRisk("submodule", moved.actions[0])}) is None
    assert outstanding(report, {AskedRisk("submodule", "move `vendor/lib` from `a1` to `c3`")})


def test_a_report_beyond_the_approval_says_what_was_approved_already() -> None:
    report = classify_change([m("package.json"), m("deploy/prod.sh")], CONFIG)
    assert report is not None
    blocked = blocked_for(report, {DEPS})
    BlockedResult.model_validate(blocked)
    assert blocked["decision"] == (
        "This fix would change `deploy/prod.sh` and change `package.json`, more than the "
        "answer to the last question approved. Should it go ahead?"
    )
    why = str(blocked["why"]).splitlines()
    assert why[0].startswith("- change `deploy/prod.sh`: `fix.protected_paths`")
    assert why[1].startswith("- change `package.json` (already approved): a dependency change")
    assert "already approved" not in str(blocked_for(report)["why"])


@pytest.mark.parametrize(
    ("text", "choice"),
    [
        pytest.param(OPTION_PROCEED, "proceed", id="proceed"),
        pytest.param(OPTION_PATCH.upper(), "patch", id="any-case"),
        pytest.param(f"  {OPTION_NARROW}\n", "narrow", id="spaces"),
        pytest.param(OPTION_STOP, "stop", id="stop"),
        pytest.param("only change the README", None, id="free-text"),
    ],
)
def test_choice_of(text: str, choice: str | None) -> None:
    assert choice_of(text) == choice


# --- branch names ---------------------------------------------------------------------------

_GIT_REFUSES = re.compile(r"\.\.|[~^:?*\[\\\x00-\x20\x7f]|@\{|\.lock$|/$|//|\.$|/\.")

BRANCHES = [
    pytest.param(12, "Crash on empty input", set(), "bot/fix-12-crash-on-empty-input", id="plain"),
    pytest.param(3, "", set(), "bot/fix-3", id="empty-title"),
    pytest.param(3, "💥 !!! ✨", set(), "bot/fix-3", id="no-ascii-words"),
    pytest.param(4, "Ünïcödé naïve café", set(), "bot/fix-4-unicode-naive-cafe", id="accents"),
    pytest.param(
        5,
        "refs/heads/../x~1^2:y?*[z\\ .lock",
        set(),
        "bot/fix-5-refs-heads-x-1-2-y-z-lock",
        id="git-metacharacters",
    ),
    pytest.param(
        6,
        "Make the parser accept trailing commas in nested arrays and objects",
        set(),
        "bot/fix-6-make-the-parser-accept-trailing-commas",
        id="long-cut-at-a-word",
    ),
    pytest.param(7, "x" * 100, set(), "bot/fix-7-" + "x" * 40, id="one-long-word"),
    pytest.param(8, "Typo", {"bot/fix-8-typo"}, "bot/fix-8-typo-2", id="taken"),
    pytest.param(
        8,
        "Typo",
        {"refs/heads/bot/fix-8-typo", "BOT/FIX-8-TYPO-2", "bot/fix-8-typo-4"},
        "bot/fix-8-typo-3",
        id="taken-refs-and-case",
    ),
    pytest.param(9, "", {"bot/fix-9"}, "bot/fix-9-2", id="taken-without-slug"),
]


@pytest.mark.parametrize(("number", "title", "existing", "expected"), BRANCHES)
def test_branch_name(number: int, title: str, existing: set[str], expected: str) -> None:
    name = branch_name(number, title, existing)
    assert name == expected
    assert not _GIT_REFUSES.search(name) and name.isascii()
    assert len(name.removeprefix(f"bot/fix-{number}-")) <= 45
    assert is_fix_branch(name, number)


def test_branch_name_needs_an_issue_number() -> None:
    with pytest.raises(ValueError, match="positive"):
        branch_name(0, "x", ())


@pytest.mark.parametrize(
    ("name", "number", "ok"),
    [
        pytest.param("bot/fix-1", 1, True, id="bare"),
        pytest.param("refs/heads/bot/fix-1-typo-2", 1, True, id="ref"),
        pytest.param("bot/fix-12", 1, False, id="other-issue-prefix"),
        pytest.param("bot/fix-1", 12, False, id="other-issue"),
        pytest.param("bot/review-1", 1, False, id="other-kind"),
        pytest.param("feature/bot/fix-1", 1, False, id="not-at-the-start"),
        pytest.param("bot/fix-1-Typo", 1, False, id="not-a-slug"),
    ],
)
def test_is_fix_branch(name: str, number: int, ok: bool) -> None:
    assert is_fix_branch(name, number) is ok


# --- pull request and commit text -----------------------------------------------------------

USAGE = UsageSummary(input_tokens=12_345, output_tokens=678, cost=0.0421, wall_seconds=41.6)


@pytest.mark.parametrize(
    ("check", "line"),
    [
        pytest.param(CheckResult("make test", 0), "`make test` passed.", id="passed"),
        pytest.param(
            CheckResult("make test", 2), "`make test` failed with exit code 2.", id="failed"
        ),
        pytest.param(
            CheckResult("make test", None, timeout=300),
            "`make test` timed out after 300 s.",
            id="timed-out",
        ),
        pytest.param(
            CheckResult("echo `x`", 0), "`` echo `x` `` passed.", id="backticks-in-command"
        ),
        pytest.param(
            None,
            "Not configured: set `fix.check_command` in `.github/bot.yml` to run one.",
            id="not-configured",
        ),
    ],
)
def test_pull_request_body_reports_the_check(check: CheckResult | None, line: str) -> None:
    _, body = pull_request_text(
        number=7, title="t", summary="s", check=check, assumptions=[], usage=USAGE
    )
    assert "## Check\n\n" + line + "\n" in body


def test_pull_request_text() -> None:
    title, body = pull_request_text(
        number=42,
        title="Crash on\nempty input",
        summary="Guard the empty list in `parse()` and add a test.\n",
        check=CheckResult("pytest -q", 0),
        assumptions=["The empty list means no items.", "  ", "Python 3.11\nonly"],
        usage=USAGE,
    )
    assert title == "Fix: Crash on empty input"
    assert body == (
        "Fixes #42\n\n## What changed and why\n\n"
        "Guard the empty list in `parse()` and add a test.\n\n"
        "## Check\n\n`pytest -q` passed.\n\n"
        "## Assumptions\n\n- The empty list means no items.\n- Python 3.11 only\n\n"
        "---\nUsage: 12,345 input and 678 output tokens, cost $0.0421, 42 s."
    )


@pytest.mark.parametrize(
    ("kwargs", "title", "parts"),
    [
        pytest.param({"title": "  "}, "Fix #5", ["Fixes #5\n"], id="empty-title"),
        pytest.param({"title": "a" * 300}, "Fix: " + "a" * 94 + "…", [], id="long-title-capped"),
        pytest.param({"title": "t\x07\x1b[31m"}, "Fix: t??[31m", [], id="control-characters"),
        pytest.param(
            {"closes": False}, "Fix: t", ["Requested in #5.\n"], id="refers-without-closing"
        ),
        pytest.param(
            {"summary": " "},
            "Fix: t",
            ["The change is in the commits of this pull request.", "\n\nNone.\n"],
            id="no-summary-no-assumptions",
        ),
        pytest.param(
            {"summary": "x" * 30_000}, "Fix: t", ["x" * 20_000 + "\n\n(cut here)"], id="cut"
        ),
        pytest.param(
            {"usage": UsageSummary()},
            "Fix: t",
            ["0 input and 0 output tokens, cost unknown"],
            id="unknown-cost",
        ),
    ],
)
def test_pull_request_text_edges(kwargs: dict[str, object], title: str, parts: list[str]) -> None:
    args: dict[str, object] = {
        "number": 5,
        "title": "t",
        "summary": "s",
        "check": None,
        "assumptions": [],
        "usage": USAGE,
        **kwargs,
    }
    got_title, body = pull_request_text(**args)  # type: ignore[arg-type]
    assert got_title == title and len(got_title) <= 100
    for part in parts:
        assert part in body
    assert ("Fixes #5" in body) is (kwargs.get("closes", True) is True)


@pytest.mark.parametrize(
    ("login", "user_id", "trailer"),
    [
        pytest.param(
            "octocat",
            583231,
            "Co-authored-by: octocat <583231+octocat@users.noreply.github.com>",
            id="user",
        ),
        pytest.param(
            "dependabot[bot]",
            49699333,
            "Co-authored-by: dependabot[bot] <49699333+dependabot[bot]@users.noreply.github.com>",
            id="bot",
        ),
    ],
)
def test_co_author_trailer(login: str, user_id: int, trailer: str) -> None:
    assert co_author_trailer(login, user_id) == trailer


@pytest.mark.parametrize(
    ("login", "user_id"),
    [
        pytest.param("octo cat", 1, id="space"),
        pytest.param("octocat\nSigned-off-by: x", 1, id="newline"),
        pytest.param("a>b", 1, id="angle"),
        pytest.param("-octocat", 1, id="leading-dash"),
        pytest.param("a" * 40, 1, id="too-long"),
        pytest.param("octocat", 0, id="no-id"),
    ],
)
def test_co_author_trailer_refuses_what_is_not_a_login(login: str, user_id: int) -> None:
    with pytest.raises(ValueError, match="not a GitHub login"):
        co_author_trailer(login, user_id)


TRAILER = "Co-authored-by: octocat <583231+octocat@users.noreply.github.com>"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param("Fix it", f"Fix it\n\n{TRAILER}\n", id="subject-only"),
        pytest.param("Fix it\n\nBecause.\n\n", f"Fix it\n\nBecause.\n\n{TRAILER}\n", id="body"),
        pytest.param(
            "Fix it\n\nCo-authored-by: a <1+a@users.noreply.github.com>",
            f"Fix it\n\nCo-authored-by: a <1+a@users.noreply.github.com>\n{TRAILER}\n",
            id="joins-trailers",
        ),
        pytest.param(f"Fix it\n\n{TRAILER}\n", f"Fix it\n\n{TRAILER}\n", id="once"),
        pytest.param("", f"\n\n{TRAILER}\n", id="empty"),
    ],
)
def test_with_trailer(message: str, expected: str) -> None:
    assert with_trailer(message, TRAILER) == expected


# --- submodules and symbolic links ----------------------------------------------------------

SUB_A, SUB_B = "a" * 40, "b" * 40


@pytest.mark.parametrize(
    ("mode", "kind", "action"),
    [
        (
            ModeChange("lib", "160000", "160000", SUB_A, SUB_B),
            "submodule",
            f"move the submodule `lib` from `{SUB_A[:12]}` to `{SUB_B[:12]}`",
        ),
        (
            ModeChange("lib", "000000", "160000", "0" * 40, SUB_B),
            "submodule",
            f"add the submodule `lib` at `{SUB_B[:12]}`",
        ),
        (
            ModeChange("lib", "160000", "000000", SUB_A, "0" * 40),
            "submodule",
            "remove the submodule `lib`",
        ),
        (
            ModeChange("a/up", "000000", "120000", target="../../.."),
            "symlink",
            "link `a/up` to `../../..`, outside the repository",
        ),
        (
            ModeChange("root", "120000", "120000", target="/"),
            "symlink",
            "link `root` to `/`, outside the repository",
        ),
        (
            ModeChange("x", "000000", "120000", target=None),
            "symlink",
            "link `x` to a target that could not be read",
        ),
        (
            ModeChange("run.sh", "100755", "120000", target="tools/run.sh"),
            "symlink",
            "turn `run.sh` into a symbolic link",
        ),
    ],
)
def test_submodules_and_links_out_of_the_tree_need_a_decision(
    mode: ModeChange, kind: str, action: str
) -> None:
    report = classify_change([("M", mode.path, None, 1, 1)], CONFIG, modes=[mode])
    assert reasons(report) == {kind: [action]}
    assert report is not None and report.pushable
    blocked = blocked_for(report)
    BlockedResult.model_validate(blocked)
    assert action in str(blocked["decision"]) and str(blocked["risk"])


def test_a_link_inside_the_tree_and_a_deleted_link_are_ordinary_changes() -> None:
    modes = [
        ModeChange("docs/a", "000000", "120000", target="../README.md"),
        ModeChange("old", "120000", "000000", target=None),
    ]
    assert classify_change([m("docs/a"), m("old")], CONFIG, modes=modes) is None
