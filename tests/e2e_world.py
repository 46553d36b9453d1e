"""The world of the end-to-end tests that tell one repository's story: `bot serve` on the fake
GitHub (repository `octo/hello`, installation 42) and a fake model, and the ways a test talks
to it: signed deliveries in, the runs' rows and the fake's state out.

`World` is what every such test uses; `ReviewWorld` adds a pull request's reviews
(test_e2e_review.py, test_e2e_review_real.py); test_e2e_fix.py adds its own branches.
`review_world` serves one pull request of a bare repository to review; `RealPull` does it for
a starlette pull request of `../shared/real-repos` (`needs_real` skips without them).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Self

import anyio
import httpx
import pytest

from policies.outcome import OUTCOME_STATUSES
from tests.conftest import SHARED
from tests.fakes.github import FakeGitHub, commit_files
from tests.fakes.llm import FakeLLM, Reply
from tests.fakes.review_model import ReviewModel
from tests.review._calc import CalcRepo, build_calc
from tests.scripted import bot_on_fakes, delivery_headers


@dataclass(kw_only=True)
class World:
    url: str
    fake: FakeGitHub
    llm: FakeLLM
    db: Path
    log: Path
    root: Path
    counter: int = 0

    guid_prefix: ClassVar[str] = "e2e"
    final: ClassVar[tuple[str, ...]] = OUTCOME_STATUSES  # the statuses a run ends in
    patience: ClassVar[float] = 60.0  # seconds `wait` waits by default

    @classmethod
    @contextmanager
    def serving(
        cls,
        root: Path,
        fake: FakeGitHub,
        responder: Callable[[dict[str, Any]], Reply],
        serve_args: Sequence[str] = (),
        **fields: Any,
    ) -> Iterator[Self]:
        """`bot serve [serve_args]` in `root` on `fake` and a fake model answering with
        `responder`; yields the world of it, built with `fields` too."""
        env = {"BOT_APP_SLUG": fake.slug, "BOT_GITHUB_WRITE_INTERVAL": "0"}
        with bot_on_fakes(root, fake, responder, extra_env=env, serve_args=serve_args) as (
            llm,
            running,
        ):
            yield cls(
                url=running.url,
                fake=fake,
                llm=llm,
                db=running.db,
                log=running.log,
                root=root,
                **fields,
            )

    def post(self, event: str, payload: dict[str, Any]) -> str:
        self.counter += 1
        guid = f"{self.guid_prefix}-{self.counter:04d}"
        body = json.dumps(payload).encode()
        headers = delivery_headers(event, guid, self.fake.webhook_secret, body)
        answer = httpx.post(
            f"{self.url}/webhooks/github", content=body, headers=headers, timeout=10
        )
        assert answer.status_code == 202, answer.text
        return guid

    def query(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.db, timeout=10) as conn:
            return conn.execute(sql, args).fetchall()

    def wait(self, what: str, done: Callable[[], bool], timeout: float | None = None) -> None:
        deadline = time.monotonic() + (self.patience if timeout is None else timeout)
        while not done():
            if time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-6000:]
                raise AssertionError(f"timed out waiting for {what}; server log:\n{tail}")
            time.sleep(0.05)

    def finished(self, guid: str) -> tuple[str, str]:
        def done() -> bool:
            rows = self.query("SELECT status FROM runs WHERE delivery_id = ?", guid)
            return bool(rows) and rows[0][0] in self.final

        self.wait(f"the run of {guid}", done)
        rid, status = self.query("SELECT id, status FROM runs WHERE delivery_id = ?", guid)[0]
        return str(rid), str(status)

    def command(self, body: str, number: int = 1, user: str = "maint") -> str:
        fr = self.fake.repos["octo/hello"]
        comment = self.fake.add_comment("octo", "hello", number, body, user=user)
        payload = {
            "action": "created",
            "issue": fr.issues[number],
            "comment": comment,
            "repository": self.fake._repo_stub(fr.full_name, fr),
            "installation": {"id": 42},
            "sender": comment["user"],
        }
        return self.post("issue_comment", payload)

    def review_comment_event(self, comment: dict[str, Any], number: int = 1) -> dict[str, Any]:
        """The `pull_request_review_comment.created` payload of `comment` (one the fake
        recorded, a new thread or a reply) on pull request `number`."""
        fr = self.fake.repos["octo/hello"]
        return {
            "action": "created",
            "comment": comment,
            "pull_request": fr.pulls[number],
            "repository": self.fake._repo_stub(fr.full_name, fr),
            "installation": {"id": 42},
            "sender": comment["user"],
        }

    def own_comments(self, number: int = 1) -> list[dict[str, Any]]:
        return [
            c
            for c in self.fake.comments_on("octo", "hello", number)
            if c["user"]["login"] == self.fake.bot_login
        ]

    def mirror(self) -> Path:
        return self.root / "data" / "repos" / "octo" / "hello.git"


@dataclass(kw_only=True)
class ReviewWorld(World):
    """A pull request's reviews: `calc` names its base and the heads it is pushed to."""

    model: ReviewModel
    calc: CalcRepo
    notes: dict[str, Any] = field(default_factory=dict)

    guid_prefix: ClassVar[str] = "review"

    def pull(self, number: int = 1) -> dict[str, Any]:
        return self.fake.repos["octo/hello"].pulls[number]

    def reviews(self, number: int = 1) -> list[dict[str, Any]]:
        return list(self.fake.repos["octo/hello"].reviews.get(number, []))

    def review_comments(self, number: int = 1) -> list[dict[str, Any]]:
        return list(self.fake.repos["octo/hello"].review_comments.get(number, []))

    def pull_payload(self, action: str, number: int = 1, **extra: Any) -> dict[str, Any]:
        pull = self.pull(number)
        fr = self.fake.repos["octo/hello"]
        return {
            "action": action,
            "number": number,
            "pull_request": pull,
            "repository": self.fake._repo_stub(fr.full_name, fr),
            "installation": {"id": 42},
            "sender": pull["user"],
            **extra,
        }

    def push(self, sha: str, number: int = 1) -> str:
        payload = anyio.run(self.fake.push_pull, "octo", "hello", number, sha)
        return self.post("pull_request", payload)

    def review_opened(self, number: int = 1) -> str:
        """Delivers pull request `number`'s `opened` and waits for its run, which must
        succeed (else the server log's tail is the message); returns the delivery's GUID."""
        guid = self.post("pull_request", self.pull_payload("opened", number))
        _, status = self.finished(guid)
        assert status == "succeeded", self.log.read_text()[-3000:]
        return guid


def file_at(bare: Path, ref: Callable[[], str]) -> Callable[[str], str | None]:
    """Reads a file of `bare` at the commit `ref()` names when called (None if absent)."""

    def read(path: str) -> str | None:
        done = subprocess.run(
            ["git", f"--git-dir={bare}", "show", f"{ref()}:{path}"], capture_output=True
        )
        return done.stdout.decode() if done.returncode == 0 else None

    return read


def head_files(bare: Path, fake: FakeGitHub, number: int = 1) -> Callable[[str], str | None]:
    """Reads a file of `bare` at the head of pull request `number` as it is when called."""
    return file_at(bare, lambda: fake.repos["octo/hello"].pulls[number]["head"]["sha"])


ADMIN: Mapping[str, str] = MappingProxyType({"octo": "admin"})
ADMIN_AND_WRITER: Mapping[str, str] = MappingProxyType({"octo": "admin", "maint": "write"})
CALC_PULL: Mapping[str, Any] = MappingProxyType(
    {"head": "topic", "user": "alice", "title": "Add mean"}
)
NOTHING: Mapping[str, str] = MappingProxyType({})


@contextmanager
def review_world(
    root: Path,
    model: ReviewModel,
    *,
    calc: CalcRepo | None = None,
    pull: Mapping[str, Any] = CALC_PULL,
    permissions: Mapping[str, str] = ADMIN,
    default_branch: str = "main",
    default_files: Mapping[str, str] = NOTHING,
    installed: Sequence[str] = ("octo/hello",),
    prepare: Callable[[FakeGitHub], None] = lambda _fake: None,
    serve_args: Sequence[str] = (),
) -> Iterator[ReviewWorld]:
    """`bot serve [serve_args]` on a fake GitHub with `calc.git_dir` (default: `build_calc`'s
    in `root`) as `octo/hello`: `default_files` committed to its default branch first,
    installation 42 on the `installed` repositories, `permissions` (login: permission) on
    `octo/hello`, and pull request #1 (`pull` are `FakeGitHub.add_pull`'s arguments; default:
    alice's `topic`), then `prepare(fake)`. `model` answers, reading files at the pull
    request's head."""
    calc = build_calc(root) if calc is None else calc
    if default_files:
        commit_files(calc.git_dir, default_branch, dict(default_files), "Configure the app")
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", calc.git_dir, default_branch=default_branch)
    fake.add_installation(42, "octo", list(installed))
    for login, permission in permissions.items():
        fake.set_permission("octo", "hello", login, permission)
    anyio.run(lambda: fake.add_pull("octo", "hello", **pull))
    prepare(fake)
    model.files = head_files(calc.git_dir, fake)
    with ReviewWorld.serving(root, fake, model, serve_args, model=model, calc=calc) as w:
        yield w


REAL = SHARED / "real-repos"
needs_real = pytest.mark.skipif(
    not (REAL / "starlette.bundle").exists(), reason="needs ../shared/real-repos"
)


@dataclass(frozen=True)
class RealPull:
    """A starlette pull request of `../shared/real-repos` (`pr`, its entry in
    starlette-prs.json), the bundle cloned bare into `root/remote/octo/hello.git`."""

    root: Path
    pr: dict[str, Any]
    bare: Path

    @classmethod
    def clone(cls, root: Path, number: int) -> Self:
        prs = json.loads((REAL / "starlette-prs.json").read_text())
        pr = next(p for p in prs if p["pr"] == number)
        bare = root / "remote" / "octo" / "hello.git"
        subprocess.run(
            ["git", "clone", "-q", "--bare", str(REAL / "starlette.bundle"), str(bare)],
            check=True,
        )
        return cls(root, pr, bare)

    def commit(self, index: int) -> str:
        return str(self.pr["commits"][index])

    @contextmanager
    def serving(
        self,
        model: ReviewModel,
        *,
        user: str,
        commits: tuple[int, int] = (-2, -1),
        base: str | None = None,
        default_files: Mapping[str, str] = NOTHING,
        prepare: Callable[[FakeGitHub], None] = lambda _fake: None,
        serve_args: Sequence[str] = (),
    ) -> Iterator[ReviewWorld]:
        """`review_world` on the pull request opened by `user` at its commit `commits[0]`
        (the push goes to `commits[1]`), on `base` (a branch; default: the pull request's
        base), `octo` its admin; `default_files` are committed to `master`."""
        base_sha = str(self.pr["base"]) if base is None else _rev_parse(self.bare, base)
        calc = CalcRepo(self.bare, base_sha, self.commit(commits[0]), self.commit(commits[1]))
        pull = {"head": calc.head1, "base": base or base_sha, "user": user}
        with review_world(
            self.root,
            model,
            calc=calc,
            pull=pull,
            default_branch="master",
            default_files=default_files,
            prepare=prepare,
            serve_args=serve_args,
        ) as w:
            yield w


def _rev_parse(bare: Path, ref: str) -> str:
    done = subprocess.run(
        ["git", f"--git-dir={bare}", "rev-parse", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()
