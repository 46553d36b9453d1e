"""Benchmark `fix`: from the webhook's 202 to the draft pull request, on a repository of ~20,000 files.

`bot serve` runs as a subprocess against the fake GitHub and a fake model that answers at once
(`tests.fakes.fix_model`: plan, one `write_file`, commit, review). Each run opens an issue and
posts `@repo-agent fix` from a writer; the time from the 202 to the fake's `POST /pulls` answer
is measured, and every request the app made to GitHub is listed, with the size of what the
push sent. The first run is "cold" (token issued, mirror cloned); the next are "warm".

    .venv/bin/python bench/fix.py [--runs 4] [--files 20000] [--check]

`--check` configures `fix.check_command: "true"`, which needs a full checkout of the tree in
the sandbox (the one place a fix checks out every file).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import Run, print_runs  # noqa: E402
from tests.fakes.fix_model import Edit, FixModel  # noqa: E402
from tests.fakes.github import FakeGitHub  # noqa: E402
from tests.scripted import bot_on_fakes, delivery_headers  # noqa: E402


def big_repo(path: Path, files: int, check: bool) -> None:
    """A bare repository with `files` small files in 100 directories, by `git fast-import`."""
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    lines: list[bytes] = []
    config = "fix:\n  check_command: 'true'\n  check_timeout: 120\n" if check else "fix: {}\n"
    contents = {".github/bot.yml": config, "app/greet.py": 'def greet():\n    return "helo"\n'}
    for n in range(files):
        contents[f"src/d{n % 100:02d}/f{n:05d}.py"] = f"VALUE_{n} = {n}\n"
    for mark, text in enumerate(contents.values(), start=1):
        data = text.encode()
        lines += [b"blob", f"mark :{mark}".encode(), f"data {len(data)}".encode(), data]
    message = b"Start"
    lines += [
        b"commit refs/heads/main",
        b"committer Bench <bench@example.com> 1700000000 +0000",
        f"data {len(message)}".encode(),
        message,
    ]
    lines += [f"M 100644 :{i} {p}".encode() for i, p in enumerate(contents, start=1)]
    subprocess.run(
        ["git", f"--git-dir={path}", "fast-import", "--quiet"],
        input=b"\n".join(lines) + b"\n",
        check=True,
    )


def one_fix(fake: FakeGitHub, url: str, n: int) -> Run:
    fr = fake.repos["octo/hello"]
    issue = fake.add_issue("octo", "hello", title=f"greet says helo {n}", body="x", user="alice")
    comment = fake.add_comment("octo", "hello", issue["number"], "@repo-agent fix", user="maint")
    payload = {
        "action": "created",
        "issue": issue,
        "comment": comment,
        "repository": fake._repo_stub(fr.full_name, fr),
        "installation": {"id": 42},
        "sender": comment["user"],
    }
    body = json.dumps(payload).encode()
    headers = delivery_headers("issue_comment", f"bench-fix-{n}", fake.webhook_secret, body)
    since = len(fake.calls)
    response = httpx.post(f"{url}/webhooks/github", content=body, headers=headers, timeout=10)
    accepted = time.monotonic()
    assert response.status_code == 202, response.text
    deadline = accepted + 120
    while True:
        done = [c for c in fake.calls[since:] if c.method == "POST" and c.path.endswith("/pulls")]
        if done and done[0].status:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("no pull request within 120 s")
        time.sleep(0.002)
    time.sleep(1.5)  # the final comment and the next run's spacing between writes
    return done[0].at - accepted, accepted, fake.calls[since:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bare = root / "remote" / "octo" / "hello.git"
        bare.parent.mkdir(parents=True)
        big_repo(bare, args.files, args.check)
        fake = FakeGitHub()
        fake.add_repo("octo", "hello", bare)
        fake.add_installation(42, "octo", ["octo/hello"])
        fake.set_permission("octo", "hello", "maint", "write")
        model = FixModel((Edit("", {"app/greet.py": 'def greet():\n    return "hello"\n'}),))
        env = {"BOT_APP_SLUG": "repo-agent", "BOT_GITHUB_WRITE_INTERVAL": "0"}
        with bot_on_fakes(root, fake, model, extra_env=env) as (_, bot):
            results = [one_fix(fake, bot.url, n) for n in range(1, args.runs + 1)]
            pushed = [p.ref for p in fake.pushes]
    print(
        f"machine: {platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}; repository: {args.files:,} files; "
        f"check command: {'`true`' if args.check else 'none'}"
    )
    print(f"pushed refs: {', '.join(pushed)}")
    print_runs(results, "fix", "the draft pull request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
