"""End-to-end benchmark: one triage, from the webhook's 202 to the final comment on the fake GitHub.

`bot serve` runs as a subprocess on 127.0.0.1 against the fake GitHub and the fake model (which
answers at once), both on 127.0.0.1 in this process. A signed `issues.opened` is posted; the
time from its 202 to the arrival of the comment write carrying the final summary is measured,
and every request the bot made to GitHub during the triage is listed (REST API and git).

The first triage on a repository is "cold" (installation token issued, mirror cloned); the
next ones are "warm" (token cached, mirror only fetched).

    .venv/bin/python bench/e2e.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import Run, print_runs  # noqa: E402
from tests.fakes.github import Call, FakeGitHub  # noqa: E402
from tests.scripted import bot_with_fakes, delivery_headers, issues_opened  # noqa: E402


def final_write(fake: FakeGitHub, since: int) -> Call | None:
    """The comment write carrying a final summary (footer, no "working"), if it has arrived."""
    for call in fake.calls[since:]:
        body = call.json.get("body") if isinstance(call.json, dict) else None
        if (
            call.method in ("POST", "PATCH")
            and call.status in (200, 201)
            and isinstance(body, str)
            and "<sub>Run" in body
            and "working…" not in body
        ):
            return call
    return None


def one_triage(fake: FakeGitHub, url: str, n: int) -> Run:
    issue = fake.add_issue("octo", "hello", title=f"Crash {n}", body="It crashes.", user="someone")
    body = json.dumps(issues_opened(issue, "octo/hello", 42)).encode()
    headers = delivery_headers("issues", f"bench-{n}", fake.webhook_secret, body)
    since = len(fake.calls)
    response = httpx.post(f"{url}/webhooks/github", content=body, headers=headers, timeout=10)
    accepted = time.monotonic()
    assert response.status_code == 202, response.text
    deadline = accepted + 60
    while (done := final_write(fake, since)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError("no final comment within 60 s")
        time.sleep(0.002)
    # Let stragglers land, and keep the next triage clear of the 1 s spacing between writes.
    time.sleep(1.2)
    return done.at - accepted, accepted, fake.calls[since:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with bot_with_fakes(root, extra_env={"BOT_APP_SLUG": "repo-agent"}) as (fake, _, bot):
            results = [one_triage(fake, bot.url, n) for n in range(1, args.runs + 1)]
    print(
        f"machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}"
    )
    print_runs(results, "triage", "the final comment")
    return 0


if __name__ == "__main__":
    sys.exit(main())
