"""Findings proven by a failing test, on real pull requests with a planted bug and a planted
non-bug.

For every pull request in the list, a commit on top of its head (a copy: the real history is
untouched) plants two one-line changes in `starlette/datastructures.py`:

- a bug: `URL.port` returns `self.components.port or 80`, so a URL without a port claims 80
  (a behaviour starlette's own tests check);
- a non-bug: `URL.path` returns `str(self.components.path)`, which changes nothing.

The fake model (`tests.fakes.review_model`) reports one finding on each: a right one on the
port ("URL.port claims 80 when the URL has no port", with the right fix) and a wrong one on
the path ("URL.path is not a str for a URL without a path"), and for each writes a unittest
the way a prover would. The app reviews the pull request twice, in-process on the fake
GitHub (its `.github/bot.yml` handed to the executor directly): once with `review.test_command: python3 -m unittest {tests}` and `require_proof`,
once without a test command, so the difference is what proving adds.

Printed per pull request: whether the planted bug was posted inline as reproduced, whether
the planted non-bug was reproduced (it must not be) or posted inline (it must not be, with
`require_proof`), the review's wall time and input tokens with and without proofs, and per
proven finding the wall time and tokens added. The last line is the verdict.

A pull request whose planted head the sandbox's `python3` cannot import is skipped and says
so: no test can run its code (the oldest starlette imports `aiofiles` or `requests` when the
package is imported, and the sandbox has only the system's Python without them).

    .venv/bin/python bench/proofs.py [--bundle PATH --prs PATH] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "real-repos"

from bot.agents.runtime import build_runner  # noqa: E402
from bot.agents.sandbox import SandboxStatus, probe_sandbox  # noqa: E402
from bot.engine.engine import Engine  # noqa: E402
from bot.git.checkout import Mirrors  # noqa: E402
from bot.github.client import GitHubApp, RetryPolicy  # noqa: E402
from bot.runs.execute import RunExecutor  # noqa: E402
from bot.settings import Settings  # noqa: E402
from bot.store.sqlite import Store  # noqa: E402
from bot.workflows.flows import FLOWS  # noqa: E402
from bot.workflows.review.suggest import check_commit  # noqa: E402
from policies.config import RepoConfig, parse_repo_config  # noqa: E402
from policies.event import Trigger  # noqa: E402
from tests.fakes.github import FakeGitHub, commit_files, serve_fake_github  # noqa: E402
from tests.fakes.llm import FakeLLM  # noqa: E402
from tests.fakes.review_model import ProofScript, ReviewModel, Rule  # noqa: E402

TARGET = "starlette/datastructures.py"
BUG = ("        return self.components.port\n", "        return self.components.port or 80\n")
NOT_BUG = ("        return self.components.path\n", "        return str(self.components.path)\n")
BUG_TITLE = "URL.port claims 80 when the URL has no port"
NOT_BUG_TITLE = "URL.path is not a str for a URL without a path"

PORT_TEST = """import unittest

from starlette.datastructures import URL


class PortOfAUrlWithoutOne(unittest.TestCase):
    def test_port_is_none_without_a_port(self) -> None:
        self.assertIsNone(URL("http://example.com/path").port)
"""
PATH_TEST = """import unittest

from starlette.datastructures import URL


class PathOfAUrlWithoutOne(unittest.TestCase):
    def test_path_is_a_str(self) -> None:
        self.assertIsInstance(URL("http://example.com").path, str)
"""
RULES = (
    Rule(
        BUG[1].strip(),
        BUG_TITLE,
        replacement=BUG[0].rstrip("\n"),
        proof=ProofScript(
            "tests/test_proof_port.py", "test_port_is_none", PORT_TEST, "AssertionError: 80"
        ),
    ),
    Rule(
        NOT_BUG[1].strip(),
        NOT_BUG_TITLE,
        proof=ProofScript(
            "tests/test_proof_path.py", "test_path_is_a_str", PATH_TEST, "is not an instance of"
        ),
    ),
)
PROVING = """review:
  test_command: python3 -m unittest {tests}
  require_proof: true
  check_timeout: 60
"""
NOT_PROVING = "review:\n  check_timeout: 60\n"
IMPORTS = "python3 -c 'import starlette.datastructures'"


@dataclass
class Figures:
    seconds: float
    tokens: int
    prove_tokens: int
    inline: list[str]
    summary: str


def plant(bare: Path, head: str, n: int) -> str | None:
    """A commit on top of `head` with both planted changes; None when the file differs."""
    import subprocess

    shown = subprocess.run(
        ["git", f"--git-dir={bare}", "show", f"{head}:{TARGET}"], capture_output=True, text=True
    )
    text = shown.stdout
    if shown.returncode != 0 or BUG[0] not in text or NOT_BUG[0] not in text:
        return None
    text = text.replace(BUG[0], BUG[1], 1).replace(NOT_BUG[0], NOT_BUG[1], 1)
    return commit_files(bare, f"planted-{n}", {TARGET: text}, "Planted", base=head)


def prove_chars(bodies: list[dict[str, Any]]) -> int:
    """The characters of every request of a prover or a proof's verifier, / 4."""
    chars = 0
    for body in bodies:
        messages = body.get("messages", [])
        first = next((m for m in messages if m.get("role") == "user"), {})
        content = first.get("content")
        if isinstance(content, str) and content.startswith(
            ("Write the smallest test", "A test was written")
        ):
            chars += sum(len(str(m.get("content") or "")) for m in messages)
    return chars // 4


async def review(
    executor: RunExecutor,
    store: Store,
    fake: FakeGitHub,
    llm: FakeLLM,
    number: int,
    head: str,
) -> Figures:
    trigger = Trigger(
        workflow="review",
        repo_full_name="octo/hello",
        installation_id=42,
        target_kind="pull_request",
        number=number,
        actor="maint",
        delivery_id=f"d{number}",
        args="",
        head_sha=head,
        command=None,
    )
    run = store.create_run(
        delivery_id=f"d{number}",
        repo="octo/hello",
        target_kind="pull_request",
        number=number,
        workflow="review",
        mode="webhook",
    )
    mark = len(llm.bodies)
    started = time.perf_counter()
    await executor(trigger, run)
    seconds = time.perf_counter() - started
    record = store.get_run(run.id)
    assert record is not None and record.outcome is not None, "the review recorded no outcome"
    if record.status == "failed":
        raise RuntimeError(f"review failed: {record.outcome.get('summary')}")
    usage = record.outcome.get("usage") or {}
    fr = fake.repos["octo/hello"]
    inline = [str(c["body"]) for c in fr.review_comments.get(number, [])]
    summary = next(
        (
            str(c["body"])
            for c in fake.comments_on("octo", "hello", number)
            if c["user"]["login"] == fake.bot_login
        ),
        "",
    )
    return Figures(
        seconds, int(usage.get("input") or 0), prove_chars(llm.bodies[mark:]), inline, summary
    )


async def bench(bundle: Path, prs: list[dict[str, Any]], workdir: Path) -> int:
    bare = workdir / "remote" / "octo" / "hello.git"
    await anyio.run_process(["git", "clone", "-q", "--bare", str(bundle), str(bare)])
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", bare, default_branch="master")
    fake.add_installation(42, "octo", ["octo/hello"])
    fake.set_permission("octo", "hello", "maint", "write")
    model = ReviewModel(RULES)
    llm = FakeLLM()
    llm.respond_with(model)
    data = workdir / "data"
    rows = []
    with serve_fake_github(fake) as gh_url:
        settings = Settings(model="fake-model", llm_base_url=llm.base_url, llm_stream=False)
        runner = build_runner(
            settings, http_client=llm.client(), sandbox=SandboxStatus(False, "benchmark")
        )
        github = GitHubApp(
            fake.app_id,
            fake.private_key_pem,
            api_url=gh_url,
            app_slug=fake.slug,
            policy=RetryPolicy(backoff_s=0.01, mutation_interval_s=0.0),
        )
        store = Store.open(data / "bot.sqlite3")
        current = [PROVING]

        async def read_config(_client: object) -> RepoConfig:
            return parse_repo_config(current[0])

        executor = RunExecutor(
            config_reader=read_config,
            github=github,
            engine=Engine(runner, data_dir=data),
            mirrors=Mirrors(data, web_url=gh_url, allow_http=True),
            store=store,
            app_slug=fake.slug,
            flows=FLOWS,
            progress_interval=600.0,
        )
        number = 0
        try:
            for n, pr in enumerate(prs, start=1):
                planted = plant(bare, str(pr["commits"][-1]), n)
                if planted is None:
                    continue
                imports = await check_commit(bare, planted, IMPORTS, time_limit=60, keep=300)
                if not imports.passed:
                    # A package the sandbox's python3 cannot import: no test can run it.
                    print(
                        f"PR {pr['pr']}: skipped, `{IMPORTS}` fails: {imports.output.strip()[-120:]}"
                    )
                    continue
                figures = []
                for config in (PROVING, NOT_PROVING):
                    current[0] = config
                    number += 1
                    await fake.add_pull(
                        "octo",
                        "hello",
                        head=planted,
                        base=str(pr["base"]),
                        number=number,
                        title=str(pr["title"]),
                        user="author",
                    )
                    figures.append(await review(executor, store, fake, llm, number, planted))
                rows.append((pr, figures[0], figures[1]))
        finally:
            await github.aclose()
            store.close()

    header = (
        f"{'PR':>5} | {'bug':>10} {'non-bug':>12} | {'with proofs':>17} | "
        f"{'without':>15} | per proven finding"
    )
    print(header)
    print("-" * len(header))
    misses = []
    added_s = added_tok = proven = 0.0
    for pr, on, off in rows:
        bug = next((b for b in on.inline if BUG_TITLE in b), "")
        bug_ok = "**Reproduced:**" in bug
        wrong_inline = any(NOT_BUG_TITLE in b for b in on.inline)
        wrong_reproduced = wrong_inline and "**Reproduced:**" in next(
            b for b in on.inline if NOT_BUG_TITLE in b
        )
        wrong_listed = "not reproduced: the test passes on the head" in on.summary
        if not bug_ok or wrong_reproduced or wrong_inline or not wrong_listed:
            misses.append(pr["pr"])
        seconds, tokens = on.seconds - off.seconds, on.tokens - off.tokens
        added_s += seconds
        added_tok += tokens
        proven += 2
        print(
            f"{pr['pr']:>5} | {'reproduced' if bug_ok else 'MISSED':>10} "
            f"{'held back' if wrong_listed and not wrong_inline else 'POSTED':>12} | "
            f"{on.seconds:>6.1f} s {on.tokens:>7,} tok | {off.seconds:>5.1f} s {off.tokens:>6,} tok | "
            f"{seconds / 2:+.1f} s, {tokens / 2:+,.0f} tok ({on.prove_tokens / 2:,.0f} in proof calls)"
        )
    print("-" * len(header))
    if rows:
        print(
            f"over {len(rows)} PRs: a proof adds {added_s / proven:.1f} s and "
            f"{added_tok / proven:,.0f} input tokens per finding"
        )
    ok = bool(rows) and not misses
    print(
        f"verdict: {'PASS' if ok else 'MISS'}: {len(rows)} PRs, planted bugs reproduced on "
        f"{len(rows) - len(misses)}, planted non-bugs never reproduced or posted inline"
        + (f"; missed on {', '.join(map(str, misses))}" if misses else "")
    )
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bundle", type=Path, default=SHARED / "starlette.bundle")
    parser.add_argument("--prs", type=Path, default=SHARED / "starlette-prs.json")
    parser.add_argument("--limit", type=int, default=0, help="only the first N pull requests")
    args = parser.parse_args()
    if not args.bundle.exists() or not args.prs.exists():
        print(f"no bundle or PR list at {args.bundle} / {args.prs}; pass --bundle and --prs")
        return 2
    if not probe_sandbox().ok:
        print("proofs run in the sandbox, and it is not available here (bot doctor says why)")
        return 2
    prs = json.loads(args.prs.read_text())
    prs = prs[: args.limit] if args.limit else prs
    with tempfile.TemporaryDirectory() as tmp:
        return anyio.run(bench, args.bundle, prs, Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
