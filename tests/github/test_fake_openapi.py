"""The fake GitHub refuses what GitHub's OpenAPI description does not allow, and says so."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import jwt
import pytest

from tests.fakes._github_openapi import FIXTURE, NOT_REST, load_fixture, operation_for
from tests.fakes._github_openapi_extract import _clean, served_routes
from tests.fakes.github import FakeGitHub, make_fake_github, take_openapi_violations

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    return make_fake_github(tmp_path)


@pytest.fixture
async def http(fake: FakeGitHub) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(fake.app), base_url="http://gh.test", trust_env=False
    ) as client:
        yield client


async def token(fake: FakeGitHub, http: httpx.AsyncClient) -> dict[str, str]:
    now = time.time()
    claims = {"iat": int(now - 60), "exp": int(now + 540), "iss": str(fake.app_id)}
    app_jwt = jwt.encode(claims, fake.private_key_pem, algorithm="RS256")
    response = await http.post(
        "/app/installations/42/access_tokens", headers={"Authorization": f"Bearer {app_jwt}"}
    )
    assert response.status_code == 201, response.text
    return {"Authorization": f"token {response.json()['token']}"}


def taken(fake: FakeGitHub) -> list[str]:
    """The fake's violations as text, taken so that teardown does not fail the test for them."""
    found = [str(v) for v in fake.openapi_violations]
    assert [str(v) for v in take_openapi_violations()] == found
    return found


async def test_a_body_the_description_refuses_gets_githubs_422(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    fake.add_issue("octo", "hello", title="t", number=1)
    headers = await token(fake, http)
    response = await http.post(
        "/repos/octo/hello/issues/1/comments", json={"body": 5}, headers=headers
    )
    assert response.status_code == 422
    answer = response.json()
    shape = json.loads((FIXTURES / "api" / "error-validation.json").read_text())
    assert set(answer) == set(shape) and answer["message"] == "Validation Failed"
    assert answer["errors"] == [
        {
            "resource": "Issues",
            "field": "body",
            "code": "invalid",
            "message": "5 is not of type 'string'",
        }
    ]
    assert answer["documentation_url"].startswith("https://docs.github.com/rest/issues/comments")
    assert fake.comments == {}  # refused before the handler ran
    assert taken(fake) == [
        "POST /repos/octo/hello/issues/1/comments "
        "(POST /repos/{owner}/{repo}/issues/{issue_number}/comments): "
        "body body: 5 is not of type 'string'"
    ]


async def test_a_missing_required_field_is_a_missing_field(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    fake.add_issue("octo", "hello", title="t", number=1)
    headers = await token(fake, http)
    response = await http.post(
        "/repos/octo/hello/issues/1/comments", json={"text": "hi"}, headers=headers
    )
    assert response.status_code == 422
    assert [(e["field"], e["code"]) for e in response.json()["errors"]] == [
        ("body", "missing_field")
    ]
    assert len(taken(fake)) == 1


async def test_an_enum_and_a_type_deep_in_the_body_are_checked(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    headers = await token(fake, http)
    run = {"name": "review", "head_sha": "a" * 40, "status": "done", "output": {"title": 1}}
    response = await http.post("/repos/octo/hello/check-runs", json=run, headers=headers)
    assert response.status_code == 422
    fields = sorted(e["field"] for e in response.json()["errors"])
    assert "status" in fields and "output.title" in fields
    assert fake.check_runs == {}
    assert len(taken(fake)) == 1


async def test_a_timestamp_must_be_a_date_time(fake: FakeGitHub, http: httpx.AsyncClient) -> None:
    headers = await token(fake, http)
    run = {"name": "review", "head_sha": "a" * 40, "started_at": "yesterday"}
    response = await http.post("/repos/octo/hello/check-runs", json=run, headers=headers)
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["errors"]] == ["started_at"]
    assert len(taken(fake)) == 1


async def test_query_parameters_have_names_types_and_enums(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    headers = await token(fake, http)
    good = await http.get(
        "/repos/octo/hello/pulls", params={"state": "all", "per_page": 100}, headers=headers
    )
    assert good.status_code == 200, good.text
    for params, field in [
        ({"colour": "red"}, "colour"),
        ({"state": "merged"}, "state"),
        ({"per_page": "lots"}, "per_page"),
    ]:
        response = await http.get("/repos/octo/hello/pulls", params=params, headers=headers)
        assert response.status_code == 422, params
        assert [e["field"] for e in response.json()["errors"]] == [field]
    assert len(taken(fake)) == 3


async def test_a_body_where_the_operation_takes_none_is_refused(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    headers = await token(fake, http)
    response = await http.request("GET", "/repos/octo/hello", json={"x": 1}, headers=headers)
    assert response.status_code == 422
    assert len(taken(fake)) == 1


async def test_an_unknown_method_or_path_is_404_and_a_violation(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    headers = await token(fake, http)
    for method, path in [("GET", "/repos/octo/hello/teleport"), ("DELETE", "/repos/octo/hello")]:
        response = await http.request(method, path, headers=headers)
        assert response.status_code == 404
        assert response.json()["message"] == "Not Found"
    assert [c.status for c in fake.calls_to("*", "/repos/octo/hello*")] == [404, 404]
    assert [v.split(": ", 1)[0] for v in taken(fake)] == [
        "GET /repos/octo/hello/teleport (no operation of GitHub's REST API)",
        "DELETE /repos/octo/hello (no operation of GitHub's REST API)",
    ]


async def test_authentication_comes_before_validation(
    fake: FakeGitHub, http: httpx.AsyncClient
) -> None:
    fake.add_issue("octo", "hello", title="t", number=1)
    response = await http.post("/repos/octo/hello/issues/1/comments", json={"body": 5})
    assert response.status_code == 401  # as GitHub: who asks is checked first
    assert len(taken(fake)) == 1  # the test still hears of the bad body


async def test_a_valid_request_is_no_violation(fake: FakeGitHub, http: httpx.AsyncClient) -> None:
    fake.add_issue("octo", "hello", title="t", number=1)
    headers = await token(fake, http)
    response = await http.post(
        "/repos/octo/hello/issues/1/comments", json={"body": "hi"}, headers=headers
    )
    assert response.status_code == 201, response.text
    assert fake.openapi_violations == []


def test_every_route_of_the_fake_is_an_operation_or_named_not_rest() -> None:
    routes = served_routes()
    assert len(routes) == len(load_fixture()["operations"]) + len(NOT_REST)
    for method, template in routes:
        operation = operation_for(method, template)
        assert (operation is None) == (f"{method} {template}" in NOT_REST)


def test_a_route_github_does_not_have_stops_the_fake() -> None:
    with pytest.raises(LookupError, match="scripts/openapi_extract"):
        operation_for("DELETE", "/repos/{owner}/{repo}/issues/{number:int}")


def test_the_fixture_says_where_it_comes_from() -> None:
    source = load_fixture()["source"]
    assert source["package"] == "@octokit/openapi@23.0.2" and source["license"] == "MIT"
    assert (FIXTURE.parent / "LICENSE").read_text().startswith("MIT License")
    assert FIXTURE.stat().st_size < 300_000


def test_the_extract_drops_documentation_but_not_fields_named_like_it() -> None:
    schema = {
        "type": "object",
        "description": "A label.",
        "x-github": {"triggersNotification": True},
        "properties": {
            "description": {"type": "string", "description": "What it is for."},
            "examples": {"type": "array", "items": {"type": "string", "example": "x"}},
        },
        "enum": [{"description": "kept as a value"}],
    }
    assert _clean(schema) == {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "examples": {"type": "array", "items": {"type": "string"}},
        },
        "enum": [{"description": "kept as a value"}],
    }
