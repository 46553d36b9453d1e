"""Property: for random findings over real diffs, GitHub's anchor rules accept every inline
comment the publisher sends (the fake GitHub validates anchors against the served diff)."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from bot.workflows.review import diffs
from bot.workflows.review.publish import post_review
from bot.workflows.review.render import Shown
from policies.diff import Anchor, anchor_for
from tests.conftest import SHARED
from tests.fakes.github import FakeGitHub
from tests.github._client_world import make_app
from tests.review._calc import build_calc

pytestmark = pytest.mark.anyio
BUNDLE = SHARED / "real-repos" / "starlette.bundle"


def cases(tmp_path: Path) -> list[tuple[Path, str, str]]:
    calc = build_calc(tmp_path)
    found = [(calc.git_dir, calc.base, calc.head1), (calc.git_dir, calc.base, calc.head2)]
    if BUNDLE.exists():
        bare = tmp_path / "remote" / "octo" / "starlette.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(BUNDLE), str(bare)], check=True)
        prs = json.loads((SHARED / "real-repos" / "starlette-prs.json").read_text())
        found += [(bare, pr["base"], pr["commits"][-1]) for pr in prs[:8]]
    return found


async def test_random_findings_always_anchor(tmp_path: Path) -> None:
    rng = random.Random(20261130)
    checked = 0
    for n, (bare, base, head) in enumerate(cases(tmp_path)):
        fake = FakeGitHub()
        fake.add_repo("octo", "hello", bare)
        fake.add_installation(42, "octo", ["octo/hello"])
        await fake.add_pull("octo", "hello", head=head, base=base, number=n + 1)
        changes = await diffs.pull_changes(bare, base, head)
        files = [f for f in changes.files if f.hunks]
        assert files
        async with make_app(fake) as app:
            client = app.installation(42, "octo", "hello")
            for _round in range(3):
                inline: list[tuple[Shown, Anchor]] = []
                for i in range(8):
                    patch = rng.choice(files)
                    top = max(max(h.new_start + h.new_count for h in patch.hunks), 2)
                    start = rng.randint(1, top + 5)
                    end = start + rng.choice([0, 0, 1, 3, 10, 40])
                    anchor = anchor_for(patch, start, end)
                    if anchor is None:
                        continue
                    shown = Shown(
                        f"{n:04x}{_round:04x}{i:08x}",
                        patch.path,
                        start,
                        end,
                        "medium",
                        "bug",
                        "t",
                        "x",
                    )
                    inline.append((shown, anchor))
                posted = await post_review(
                    client,
                    n + 1,
                    head=head,
                    body="b",
                    inline=inline,
                    bot_login=fake.bot_login,
                    redact=lambda s: s,
                )
                assert posted.inline, "GitHub refused an anchor the publisher computed"
                assert len(posted.comment_ids) == len({s.fingerprint for s, _ in inline})
                checked += len(inline)
    assert checked > 20
