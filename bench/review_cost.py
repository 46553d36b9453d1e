"""Review cost on real pull requests: the first review, the follow-up after a push, a full one.

For every pull request in the list, the repository (a git bundle) is served by the fake GitHub
with the pull request at `commits[-2]`; the app reviews it, the head is pushed to
`commits[-1]` and the app reviews the push, then `@app review full` reviews the final head
from scratch. The fake model answers every role at once (`tests.fakes.review_model`, with a
finding on the first new line of each file) and reports tokens deterministically (a
request's characters / 4, its tools included), so the figures compare what the app sends, not
a model's mood. The fake caches prompt prefixes as OpenAI does (at least 1,024 tokens, in
steps of 128, for five minutes: `tests.fakes.prompt_cache`), and the runs are priced at
`PRICE`, so the cost is printed as billed and as it would be without caching.

Printed per pull request: files in the PR and in the push; input tokens and model calls of
the first review, the follow-up and the full re-review; the follow-up's share of the full
re-review against its target; GitHub writes per review. The last line is a one-line verdict.

Targets: per PR, follow-up tokens at most (push files / PR files) of the full re-review plus
10 points; over all PRs, at most 40% of the full re-reviews' tokens; per review, one review
posted at most, at most two writes of the sticky summary, one check run created and completed.

With `--action`, each pull request is also reviewed as `bot action` reviews it (a copy of it,
opened at the same commits): every review in a job of its own, with a new store and data
directory, acting with a token it was given (`TokenApp`), its memory only what the sticky
summary's signed marker holds; its follow-up is printed beside the server's (target: within
5% of the server's follow-up tokens).

With `--instructions`, each pull request's base gains an AGENTS.md and a path-scoped
`.github/instructions/tests.instructions.md` (a commit on top of its base, as when the base
branch moved on), and the instructions' own tokens (the characters of their fenced blocks
and note in every request, / 4) are printed apart.

    .venv/bin/python bench/review_cost.py [--bundle PATH --prs PATH] [--limit N] [--instructions]
        [--action] [--turn-seconds S]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "real-repos"

from bot.agents.runtime import build_runner  # noqa: E402
from bot.agents.sandbox import SandboxStatus  # noqa: E402
from bot.engine.engine import Engine  # noqa: E402
from bot.git.checkout import Mirrors  # noqa: E402
from bot.github.client import GitHubApp, RetryPolicy, TokenApp  # noqa: E402
from bot.runs.execute import RunExecutor  # noqa: E402
from bot.settings import Settings  # noqa: E402
from bot.store.sqlite import Store  # noqa: E402
from bot.workflows.flows import FLOWS  # noqa: E402
from bot.workflows.instructions import NOTE  # noqa: E402
from bot.workflows.review.instructions import WHERE  # noqa: E402
from policies.event import Trigger  # noqa: E402
from tests.fakes.github import FakeGitHub, commit_files, serve_fake_github  # noqa: E402
from tests.fakes.llm import FakeLLM  # noqa: E402
from tests.fakes.review_model import ReviewModel  # noqa: E402


@dataclass
class Figures:
    tokens: int
    calls: int
    cached: int
    cost: float
    """US dollars as billed: cached input at the cache price."""
    uncached_cost: float
    """US dollars had no prompt been cached."""
    wall: float
    """Seconds the review ran (its run's wall time)."""
    chain: int
    """Model calls on the review's longest path: a unit's reviewer (and verifier), then a
    re-check and the summary, which wait for every unit."""
    reviews: int
    sticky_writes: int
    checks_created: int
    checks_completed: bool


async def review(
    executor: RunExecutor,
    store: Store,
    fake: FakeGitHub,
    model: ReviewModel,
    number: int,
    delivery: str,
    *,
    head: str | None,
    command: str | None = None,
) -> Figures:
    calls_before = sum(model.calls.values())
    roles_before = Counter(model.calls)
    mark = len(fake.calls)
    trigger = Trigger(
        workflow="review",
        repo_full_name="octo/hello",
        installation_id=42,
        target_kind="pull_request",
        number=number,
        actor="maint",
        delivery_id=delivery,
        args="full" if command else "",
        head_sha=head,
        command=command,
    )
    run = store.create_run(
        delivery_id=delivery,
        repo="octo/hello",
        target_kind="pull_request",
        number=number,
        workflow="review",
        mode="webhook",
    )
    await executor(trigger, run)
    record = store.get_run(run.id)
    assert record is not None and record.outcome is not None, "the review recorded no outcome"
    if record.status == "failed":
        raise RuntimeError(f"review failed: {record.outcome.get('summary')}")
    usage = record.outcome.get("usage") or {}
    calls = fake.calls[mark:]
    writes = [c for c in calls if c.method in ("POST", "PATCH", "PUT")]
    created = [c for c in writes if c.path.endswith("/check-runs")]
    completed = any(
        isinstance(c.json, dict) and c.json.get("status") == "completed"
        for c in writes
        if "/check-runs" in c.path
    )
    roles = Counter(model.calls) - roles_before
    unit_chain = 2 if roles["verify"] else 1 if roles["review"] else 0
    return Figures(
        wall=float(usage.get("wall_seconds") or 0.0),
        chain=unit_chain + (1 if roles["recheck"] else 0) + (1 if roles["summary"] else 0),
        cached=int(usage.get("cache_read") or 0),
        cost=float(usage.get("cost") or 0.0),
        uncached_cost=(
            (int(usage.get("input") or 0) + int(usage.get("cache_read") or 0)) * PRICE["input"]
            + int(usage.get("output") or 0) * PRICE["output"]
        )
        / 1e6,
        tokens=int(usage.get("input") or 0) + int(usage.get("cache_read") or 0),
        calls=sum(model.calls.values()) - calls_before,
        reviews=sum(1 for c in writes if c.path.endswith("/reviews")),
        sticky_writes=sum(1 for c in writes if "/issues/" in c.path and "comments" in c.path),
        checks_created=len(created),
        checks_completed=completed,
    )


AGENTS_MD = """\
# Notes for coding agents

This is Starlette, a lightweight ASGI framework. Keep the public API backwards compatible:
anything importable from `starlette.*` without a leading underscore is public. Every
behaviour change needs a test under `tests/`, run on both asyncio and trio through anyio.
Do not add dependencies; optional ones are imported lazily and fail with a clear message.
Type hints everywhere (mypy strict). Prefer small, explicit code to clever code, and keep
error messages actionable. Security-sensitive areas: request parsing (headers, forms,
multipart), static files (path traversal), sessions (signing), CORS and trusted hosts.
"""
TESTS_INSTRUCTIONS = """\
---
applyTo: "tests/**"
---
Tests use the `test_client_factory` fixture and never the network. A test asserts one
behaviour, with a name that says it; parametrize with ids rather than loops.
"""
_INSTRUCTION_BLOCK = re.compile(
    r'<data fence="[0-9a-f]+" source="instructions: [^"]*">\n.*?\n</data fence="[0-9a-f]+">',
    re.DOTALL,
)


def instruction_tokens(bodies: list[dict[str, Any]]) -> int:
    """The characters of the instruction blocks and their note in `bodies`, / 4."""
    chars = 0
    for body in bodies:
        for message in body.get("messages", []):
            content = message.get("content")
            if isinstance(content, str):
                blocks = _INSTRUCTION_BLOCK.findall(content)
                chars += sum(len(b) for b in blocks)
                chars += len(NOTE.format(where=WHERE)) * content.count("## Repository instructions")
    return chars // 4


PRICE = {"input": 2.0, "cache_read": 0.5, "output": 8.0}
"""US dollars per million tokens, cached input at a quarter of the price (as GPT-4.1's)."""
PRICES = {"fake-model": PRICE}


ACTION_OFFSET = 1000
"""The Action's copy of pull request n is n + ACTION_OFFSET."""


async def action_review(
    fake: FakeGitHub,
    gh_url: str,
    runner: Any,
    model: ReviewModel,
    number: int,
    job: Path,
    *,
    head: str,
) -> Figures:
    """One `bot action` job's review: a store, data directory and client of its own."""
    token = fake.issue_token(42, ["hello"], {}).value
    github = TokenApp(
        token,
        app_slug=fake.slug,
        api_url=gh_url,
        policy=RetryPolicy(backoff_s=0.01, mutation_interval_s=0.0),
    )
    store = Store.open(job / "bot.sqlite3")
    executor = RunExecutor(
        github=github,
        engine=Engine(runner, data_dir=job),
        mirrors=Mirrors(job, web_url=gh_url, allow_http=True),
        store=store,
        app_slug=fake.slug,
        flows=FLOWS,
        progress_interval=600.0,
        review_key=ACTION_KEY,
    )
    try:
        return await review(executor, store, fake, model, number, f"a{number}", head=head)
    finally:
        await github.aclose()
        store.close()


ACTION_KEY = b"bench action review-state key 01"
"""The Action's memory key: the same in every job, as one derived from the API key is."""


async def bench(
    bundle: Path,
    prs: list[dict[str, Any]],
    workdir: Path,
    *,
    instructions: bool = False,
    turn_seconds: float = 0.0,
    action: bool = False,
) -> int:
    bare = workdir / "remote" / "octo" / "hello.git"
    await anyio.run_process(["git", "clone", "-q", "--bare", str(bundle), str(bare)])
    fake = FakeGitHub()
    fake.add_repo("octo", "hello", bare, default_branch="master")
    fake.add_installation(42, "octo", ["octo/hello"])
    model = ReviewModel(generic=True)
    # Counts the tools and caches prefixes as OpenAI does (tests.fakes.prompt_cache).
    llm = FakeLLM(prefix_cache=True)
    if turn_seconds:
        llm.respond_with(lambda body: dataclasses.replace(model(body), delay=turn_seconds))
    else:
        llm.respond_with(model)
    data = workdir / "data"
    rows = []
    in_action: dict[int, Figures] = {}
    with serve_fake_github(fake) as gh_url:
        settings = Settings(
            model="fake-model", llm_base_url=llm.base_url, llm_stream=False, model_prices=PRICES
        )
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
        executor = RunExecutor(
            github=github,
            engine=Engine(runner, data_dir=data),
            mirrors=Mirrors(data, web_url=gh_url, allow_http=True),
            store=store,
            app_slug=fake.slug,
            flows=FLOWS,
            progress_interval=600.0,
        )
        try:
            for n, pr in enumerate(prs, start=1):
                started = time.perf_counter()
                base = pr["base"]
                if instructions:
                    base = f"bench-base-{n}"
                    commit_files(
                        bare,
                        base,
                        {
                            "AGENTS.md": AGENTS_MD,
                            ".github/instructions/tests.instructions.md": TESTS_INSTRUCTIONS,
                        },
                        "Instructions for agents",
                        base=pr["base"],
                    )
                await fake.add_pull(
                    "octo",
                    "hello",
                    head=pr["commits"][-2],
                    base=base,
                    number=n,
                    title=pr["title"],
                    user="author",
                )
                first = await review(
                    executor, store, fake, model, n, f"d{n}-1", head=pr["commits"][-2]
                )
                await fake.push_pull("octo", "hello", n, pr["commits"][-1])
                follow = await review(
                    executor, store, fake, model, n, f"d{n}-2", head=pr["commits"][-1]
                )
                full = await review(
                    executor, store, fake, model, n, f"d{n}-3", head=None, command="review"
                )
                rows.append((pr, first, follow, full, time.perf_counter() - started))
                if action:
                    copy = n + ACTION_OFFSET
                    await fake.add_pull(
                        "octo",
                        "hello",
                        head=pr["commits"][-2],
                        base=base,
                        number=copy,
                        title=pr["title"],
                        user="author",
                    )
                    jobs = workdir / f"jobs-{n}"
                    await action_review(
                        fake, gh_url, runner, model, copy, jobs / "1", head=pr["commits"][-2]
                    )
                    await fake.push_pull("octo", "hello", copy, pr["commits"][-1])
                    in_action[n] = await action_review(
                        fake, gh_url, runner, model, copy, jobs / "2", head=pr["commits"][-1]
                    )
        finally:
            await github.aclose()
            store.close()

    header = (
        f"{'PR':>5} {'files':>5} {'push':>4} | {'first tok':>9} {'calls':>5} | "
        f"{'follow tok':>10} {'calls':>5} | {'full tok':>8} {'calls':>5} | "
        f"{'share':>6} {'target':>6} | writes (review/sticky/check)"
    )
    print(header)
    print("-" * len(header))
    failures = []
    follow_total = full_total = 0
    write_problems = 0
    for pr, first, follow, full, _seconds in rows:
        files, pushed = len(pr["files"]), len(pr["last_push_files"])
        share = follow.tokens / full.tokens if full.tokens else 0.0
        target = pushed / files + 0.10
        mark = "" if share <= target else "  <- over"
        if share > target:
            failures.append(pr["pr"])
        follow_total += follow.tokens
        full_total += full.tokens
        writes = []
        for f in (first, follow, full):
            ok = (
                f.reviews <= 1
                and f.sticky_writes <= 2
                and f.checks_created == 1
                and f.checks_completed
            )
            write_problems += 0 if ok else 1
            writes.append(f"{f.reviews}/{f.sticky_writes}/{f.checks_created}{'' if ok else '!'}")
        print(
            f"{pr['pr']:>5} {files:>5} {pushed:>4} | {first.tokens:>9,} {first.calls:>5} | "
            f"{follow.tokens:>10,} {follow.calls:>5} | {full.tokens:>8,} {full.calls:>5} | "
            f"{share:>6.0%} {target:>6.0%} | {'  '.join(writes)}{mark}"
        )
    overall = follow_total / full_total if full_total else 0.0
    print("-" * len(header))
    print(
        f"follow-ups: {follow_total:,} tokens; full re-reviews: {full_total:,} tokens; "
        f"share {overall:.0%} (target at most 40%)"
    )
    print(f"model calls by role: {dict(Counter(model.calls))}")

    def dollars(pick: str, attr: str) -> float:
        index = {"follow": 2, "full": 3}[pick]
        return sum(getattr(row[index], attr) for row in rows)

    cached = sum(f.cached for _, a, b, c, _ in rows for f in (a, b, c))
    sent = sum(f.tokens for _, a, b, c, _ in rows for f in (a, b, c))
    worst = max(
        ((follow.cost / full.cost if full.cost else 0.0), pr["pr"])
        for pr, _, follow, full, _ in rows
    )
    for label, attr in (("billed", "cost"), ("without caching", "uncached_cost")):
        follow_cost, full_cost = dollars("follow", attr), dollars("full", attr)
        print(
            f"cost {label}: follow-ups ${follow_cost:.4f}, full re-reviews ${full_cost:.4f}, "
            f"share {follow_cost / full_cost if full_cost else 0:.1%}"
        )
    print(
        f"prices per million tokens: input ${PRICE['input']}, cached ${PRICE['cache_read']}, "
        f"output ${PRICE['output']}; cached {cached:,} of {sent:,} input tokens "
        f"({cached / sent if sent else 0:.1%}); costliest follow-up {worst[0]:.0%} of its "
        f"full re-review (#{worst[1]})"
    )
    if turn_seconds:
        fulls = [(pr["pr"], full) for pr, _, _, full, _ in rows]
        ratios = [(full.wall / (full.chain * turn_seconds), n, full) for n, full in fulls]
        worst_ratio, worst_pr, worst_full = max(ratios)
        median = sorted(r for r, _, _ in ratios)[len(ratios) // 2]
        print(
            f"wall time at {turn_seconds:g} s per model turn, full re-reviews: median "
            f"{median:.2f}x their longest chain of calls, worst {worst_ratio:.2f}x (#{worst_pr}: "
            f"{worst_full.wall:.1f} s for a chain of {worst_full.chain} calls, "
            f"{worst_full.calls} calls in all); target at most 1.20x"
        )
    action_ok = True
    if action:
        print("follow-ups as `bot action` runs them (a job each, memory from the marker):")
        server_total = action_total = 0
        for n, (pr, _, follow, _, _) in enumerate(rows, start=1):
            job = in_action[n]
            server_total += follow.tokens
            action_total += job.tokens
            ratio = job.tokens / follow.tokens if follow.tokens else 1.0
            print(
                f"  #{pr['pr']}: server {follow.tokens:,} tokens / {follow.calls} calls, "
                f"action {job.tokens:,} / {job.calls} ({ratio:.1%})"
            )
        ratio = action_total / server_total if server_total else 1.0
        action_ok = abs(ratio - 1) <= 0.05
        print(
            f"action follow-ups: {action_total:,} tokens against the server's {server_total:,} "
            f"({ratio:.1%}; target within 5%): {'PASS' if action_ok else 'MISS'}"
        )
    if instructions:
        spent = instruction_tokens(llm.bodies)
        total = sum(f.tokens for _, first, follow, full, _ in rows for f in (first, follow, full))
        print(
            f"instructions: {spent:,} of {total:,} input tokens "
            f"({spent / total if total else 0:.1%}), in {len(llm.bodies)} requests"
        )
    ok = not failures and overall <= 0.40 and write_problems == 0 and action_ok
    verdict = "PASS" if ok else "MISS"
    detail = []
    if failures:
        detail.append(f"per-PR target missed on {', '.join(map(str, failures))}")
    if overall > 0.40:
        detail.append(f"overall share {overall:.0%} > 40%")
    if write_problems:
        detail.append(f"{write_problems} review(s) over the write budget")
    print(
        f"verdict: {verdict}: {len(rows)} PRs, follow-ups {overall:.0%} of full re-reviews"
        + (f"; {'; '.join(detail)}" if detail else "; every per-PR and write target met")
    )
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bundle", type=Path, default=SHARED / "starlette.bundle")
    parser.add_argument("--prs", type=Path, default=SHARED / "starlette-prs.json")
    parser.add_argument("--limit", type=int, default=0, help="only the first N pull requests")
    parser.add_argument(
        "--instructions", action="store_true", help="an AGENTS.md and a scoped file on each base"
    )
    parser.add_argument(
        "--action", action="store_true", help="also each follow-up as `bot action` runs it"
    )
    parser.add_argument(
        "--turn-seconds",
        type=float,
        default=0.0,
        help="the fake model takes this long per turn; prints the reviews' wall time",
    )
    args = parser.parse_args()
    if not args.bundle.exists() or not args.prs.exists():
        print(f"no bundle or PR list at {args.bundle} / {args.prs}; pass --bundle and --prs")
        return 2
    prs = json.loads(args.prs.read_text())
    if args.limit:
        prs = prs[: args.limit]
    with tempfile.TemporaryDirectory() as tmp:
        return anyio.run(
            functools.partial(
                bench,
                instructions=args.instructions,
                turn_seconds=args.turn_seconds,
                action=args.action,
            ),
            args.bundle,
            prs,
            Path(tmp),
        )


if __name__ == "__main__":
    sys.exit(main())
