"""`bot.github.preload`: after it, the client's calls import nothing more of githubkit's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from githubkit import OAuthWebAuthStrategy

from bot.github.preload import CALLS

REPO = Path(__file__).resolve().parents[2]

# In a fresh interpreter (this one has imported githubkit's models already): the githubkit
# modules a triage's and a review's calls import, on the fake GitHub, after `preload()` or not.
SCRIPT = """
import json, sys, tempfile
from pathlib import Path
import anyio
from tests.fakes.github import commit_files
from tests.github._client_world import hello_world, make_app

fake = hello_world(Path(tempfile.mkdtemp()))
fake.set_permission("octo", "hello", "alice", "write")
commit_files(fake.repos["octo/hello"].git_dir, "topic", {"f": "1\\n"}, "Change", base="main")
if sys.argv[1] == "preload":
    from bot.github.preload import preload
    preload()
before = {name for name in sys.modules if name.startswith("githubkit")}

async def calls():
    gh = make_app(fake).installation(42, "octo", "hello")
    await gh.get_file_text(".github/bot.yml")
    await gh.get_issue(1)
    await gh.get_collaborator_permission("alice")
    await gh.list_labels()
    comment = await gh.create_issue_comment(1, "Working on it.")
    await gh.update_issue_comment(comment.id, "Done.")
    await gh.add_reaction(comment.id)
    pull = await gh.create_pull(head="topic", base="main", title="Change", body="x")
    await gh.list_pull_files(pull.number)
    await gh.list_review_comments(pull.number)
    await gh.create_review(pull.number, body="Looks fine.", commit_id=pull.head.sha)
    run = await gh.create_check_run(name="review", head_sha=pull.head.sha, external_id="r1")
    await gh.update_check_run(run.id, status="completed", conclusion="success")
    await gh.commit_statuses(pull.head.sha)

anyio.run(calls)
print(json.dumps(sorted({n for n in sys.modules if n.startswith("githubkit")} - before)))
"""


def imported_by_calls(mode: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_after_preload_a_runs_calls_import_no_githubkit_module() -> None:
    assert any(".models." in name for name in imported_by_calls("cold"))
    assert imported_by_calls("preload") == []


def test_every_githubkit_method_the_client_calls_is_preloaded() -> None:
    named = set()
    for module in (REPO / "bot" / "github").glob("*.py"):
        named |= set(re.findall(r"\.async_(\w+)", module.read_text()))
    # An auth strategy's own method (the OAuth code's exchange) is no REST method.
    named = {name for name in named if not hasattr(OAuthWebAuthStrategy, f"async_{name}")}
    preloaded = {name for names in CALLS.values() for name in names}
    assert named, "the client names githubkit's methods as `<namespace>.async_<name>`"
    assert named <= preloaded, f"add these to bot.github.preload.CALLS: {named - preloaded}"


def test_the_pool_preloads_only_when_its_runs_call_github() -> None:
    script = """
import sys, types
from bot.commands.serve import preload_github
preload_github(types.SimpleNamespace(hooks=types.SimpleNamespace(executor=None)))
without = any(".models." in n for n in sys.modules if n.startswith("githubkit"))
preload_github(None)
preload_github(types.SimpleNamespace(hooks=types.SimpleNamespace(executor=object())))
print(without, any(".models." in n for n in sys.modules if n.startswith("githubkit")))
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.stdout.split() == ["False", "True"]
