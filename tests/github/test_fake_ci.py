"""The fake GitHub's CI of other Apps: as strict as GitHub about Apps, pages and permissions."""

from __future__ import annotations

import subprocess

import httpx
import pytest

from tests.fakes.github import FakeGitHub
from tests.github.test_fake_github import fake, http, token_for

__all__ = ["fake", "http"]  # the fixtures, shared with the fake's own tests

pytestmark = pytest.mark.anyio


def head_of(fake: FakeGitHub, ref: str = "feature") -> str:
    bare = fake.repos["octo/hello"].git_dir
    done = subprocess.run(["git", f"--git-dir={bare}", "rev-parse", ref], capture_output=True)
    return done.stdout.decode().strip()


def note(line: int) -> dict[str, object]:
    return {"path": "new.py", "start_line": line, "annotation_level": "warning", "message": "m"}


async def test_other_apps_check_runs_name_their_app_and_page_annotations_by_50(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    sha = head_of(fake)
    run = fake.add_foreign_check_run(
        "octo/hello", sha, name="lint", app_slug="ci", app_id=7, conclusion="failure",
        annotations=[note(n) for n in range(1, 121)],
    )  # fmt: skip
    auth = {"Authorization": f"token {await token_for(http, fake, None)}"}
    listed = await http.get(f"/repos/octo/hello/commits/{sha}/check-runs", headers=auth)
    (only,) = listed.json()["check_runs"]
    assert (only["app"]["id"], only["app"]["slug"]) == (7, "ci")
    assert only["output"]["annotations_count"] == 120
    url = f"/repos/octo/hello/check-runs/{run['id']}/annotations"
    first = await http.get(url, params={"per_page": 100}, headers=auth)
    assert len(first.json()) == 50 and 'rel="next"' in first.headers["link"]
    last = await http.get(url, params={"per_page": 100, "page": 3}, headers=auth)
    assert [a["start_line"] for a in last.json()] == list(range(101, 121))
    assert "link" not in last.headers
    elsewhere = await http.get(
        f"/repos/octo/other/check-runs/{run['id']}/annotations", headers=auth
    )
    assert elsewhere.status_code == 404
    with pytest.raises(ValueError, match="own"):
        fake.add_foreign_check_run(
            "octo/hello", sha, name="x", app_slug=fake.slug, app_id=1, conclusion=None
        )
    with pytest.raises(ValueError, match="level"):
        fake.add_foreign_check_run(
            "octo/hello", sha, name="x", app_slug="ci", app_id=7, conclusion=None,
            annotations=[{**note(1), "annotation_level": "error"}],
        )  # fmt: skip


async def test_statuses_combine_to_the_newest_per_context_and_need_their_permission(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    sha = head_of(fake)
    auth = {"Authorization": f"token {await token_for(http, fake, None)}"}
    empty = await http.get("/repos/octo/hello/commits/feature/status", headers=auth)
    assert (empty.json()["state"], empty.json()["statuses"]) == ("pending", [])
    fake.add_commit_status("octo/hello", sha, context="ci/a", state="failure")
    fake.add_commit_status("octo/hello", sha, context="ci/a", state="success")
    fake.add_commit_status("octo/hello", sha, context="ci/b", state="success")
    combined = (await http.get("/repos/octo/hello/commits/feature/status", headers=auth)).json()
    assert combined["state"] == "success" and combined["sha"] == sha
    assert [(s["context"], s["state"]) for s in combined["statuses"]] == [
        ("ci/b", "success"),
        ("ci/a", "success"),
    ]
    every = await http.get(f"/repos/octo/hello/commits/{sha}/statuses", headers=auth)
    assert [s["state"] for s in every.json()] == ["success", "success", "failure"]
    fake.add_commit_status("octo/hello", sha, context="ci/c", state="error")
    failing = await http.get(f"/repos/octo/hello/commits/{sha}/status", headers=auth)
    assert failing.json()["state"] == "failure"
    unknown = await http.get("/repos/octo/hello/commits/nope/status", headers=auth)
    assert unknown.status_code == 422
    with pytest.raises(ValueError, match="state"):
        fake.add_commit_status("octo/hello", sha, context="x", state="broken")

    token = fake.issue_token(42, None, {"checks": "read", "contents": "read"}).value
    refused = await http.get(
        f"/repos/octo/hello/commits/{sha}/status", headers={"Authorization": f"token {token}"}
    )
    assert refused.status_code == 403
