"""Recorded GitHub responses parse into the client's models, and the fake answers in their shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from githubkit_schemas.latest.models import InstallationToken
from pydantic import BaseModel

from bot.github import models
from bot.github.client import GitHubApp, RetryPolicy
from tests.conftest import FIXTURES
from tests.fakes.github import FakeGitHub, commit_files, make_fake_github

API_FIXTURES = FIXTURES / "api"

SAMPLES: list[tuple[str, type[BaseModel]]] = [
    ("repository.json", models.Repository),
    ("issue.json", models.Issue),
    ("issue-comment.json", models.IssueComment),
    ("pull-request.json", models.PullRequest),
    ("check-run.json", models.CheckRun),
    ("installation.json", models.Installation),
    # read through githubkit's own model (bot.github.client.installation_token)
    ("installation-token.json", InstallationToken),
    ("app.json", models.AppInfo),
    ("manifest-conversion.json", models.ManifestConversion),
]


def load(name: str) -> Any:
    return json.loads((API_FIXTURES / name).read_text())


@pytest.mark.parametrize(("name", "model"), [pytest.param(n, m, id=n) for n, m in SAMPLES])
def test_samples_parse_into_the_models(name: str, model: type[BaseModel]) -> None:
    parsed = model.model_validate(load(name))
    assert parsed.model_dump()  # every sample carries at least the required fields


def test_list_samples_parse() -> None:
    files = [models.PullFile.model_validate(f) for f in load("pull-files.json")]
    assert [f.status for f in files] == ["added", "renamed"]
    assert files[1].previous_filename == "docs/old-name.md"
    runs = [
        models.CheckRun.model_validate(r) for r in load("check-runs-for-ref.json")["check_runs"]
    ]
    assert runs[0].head_sha
    assert load("collaborator-permission.json")["role_name"] == "maintain"


def test_models_accept_drift() -> None:
    issue = load("issue.json")
    issue["brand_new_field"] = {"nested": True}
    del issue["labels"]
    parsed = models.Issue.model_validate(issue)
    assert parsed.labels == [] and parsed.raw["brand_new_field"] == {"nested": True}


FULL_SHAPE: dict[str, set[str]] = {
    # sample -> keys the fake may leave out (organization-only or account-specific fields)
    "repository.json": {
        "organization",
        "network_count",
        "subscribers_count",
        "permissions",
        "temp_clone_token",
        "allow_squash_merge",
        "allow_merge_commit",
        "allow_rebase_merge",
        "allow_auto_merge",
        "delete_branch_on_merge",
        "allow_update_branch",
        "use_squash_pr_title_as_default",
    },
    "issue.json": set(),
    "issue-comment.json": set(),
    "pull-request.json": set(),
}


def modelled_keys(model: type[BaseModel], sample: dict[str, Any]) -> set[str]:
    return {name for name in model.model_fields if name in sample}


@pytest.mark.anyio
async def test_the_fake_answers_with_the_fields_real_responses_have(tmp_path: Path) -> None:
    fake: FakeGitHub = make_fake_github(tmp_path)
    bare = fake.repos["octo/hello"].git_dir
    commit_files(bare, "topic", {"a.txt": "a\n"}, "Topic", base="main")
    fake.add_issue("octo", "hello", title="t", body="b", user="octo")
    pull = await fake.add_pull("octo", "hello", head="topic")
    app = GitHubApp(
        fake.app_id,
        fake.private_key_pem,
        api_url="http://github.test",
        transport=httpx.ASGITransport(fake.app),
        policy=RetryPolicy(mutation_interval_s=0),
    )
    gh = app.installation(42, "octo", "hello")
    comment = await gh.create_issue_comment(1, "hi")
    run = await gh.create_check_run(name="c", head_sha=pull["head"]["sha"])

    async def wire(path: str) -> dict[str, Any]:
        data = (await gh.github.arequest("GET", path)).json()
        assert isinstance(data, dict)
        return data

    app_json = (await app.github.arequest("GET", "/app")).json()
    answers: dict[str, tuple[type[BaseModel], dict[str, Any]]] = {
        "repository.json": (models.Repository, await wire("/repos/octo/hello")),
        "issue.json": (models.Issue, await wire("/repos/octo/hello/issues/1")),
        "issue-comment.json": (
            models.IssueComment,
            await wire(f"/repos/octo/hello/issues/comments/{comment.id}"),
        ),
        "pull-request.json": (
            models.PullRequest,
            await wire(f"/repos/octo/hello/pulls/{pull['number']}"),
        ),
        "check-run.json": (models.CheckRun, fake.check_runs[run.id]),
        "app.json": (models.AppInfo, app_json),
    }
    for name, (model, answer) in answers.items():
        sample = load(name)
        missing = modelled_keys(model, sample) - set(answer)
        assert not missing, f"the fake's {name} lacks {sorted(missing)}"
        if name in FULL_SHAPE:
            absent = set(sample) - set(answer) - FULL_SHAPE[name]
            assert not absent, f"the fake's {name} lacks {sorted(absent)}"
        for key in ("user", "owner"):
            if isinstance(sample.get(key), dict) and key in answer:
                assert set(answer[key]) >= set(sample[key]), f"{name}: {key}"
