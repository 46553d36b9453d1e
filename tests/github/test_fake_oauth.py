"""The fake GitHub's user sign-in (OAuth web flow), user-token routes and org membership,
through real HTTP: each must refuse what GitHub refuses, or the app's sign-in tests prove
nothing."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest

from tests.fakes import _github_oauth
from tests.fakes.github import (
    FakeGitHub,
    init_bare_repo,
    make_fake_github,
    serve_fake_github,
)

CALLBACK = "https://bot.example/auth/callback"
OTHER_CALLBACK = "https://bot.example/auth/other"


@pytest.fixture
def fake(tmp_path: Path) -> FakeGitHub:
    fake = make_fake_github(tmp_path)  # octo/hello in installation 42 of account "octo"
    fake.oauth_callback_urls = [CALLBACK, OTHER_CALLBACK]
    fake.web_user = "Alice"
    return fake


@pytest.fixture
def gh(fake: FakeGitHub) -> Iterator[httpx.Client]:
    with (
        serve_fake_github(fake) as base_url,
        httpx.Client(base_url=base_url, trust_env=False, follow_redirects=False) as client,
    ):
        yield client


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The fake's OAuth clock, stopped; a test moves it by changing `clock[0]`."""
    now = [time.time()]
    monkeypatch.setattr(_github_oauth, "clock", lambda: now[0])
    return now


def app_jwt(fake: FakeGitHub) -> str:
    now = int(time.time())
    claims = {"iat": now - 60, "exp": now + 540, "iss": str(fake.app_id)}
    return jwt.encode(claims, fake.private_key_pem, algorithm="RS256")


def installation_token(
    gh: httpx.Client, fake: FakeGitHub, installation_id: int = 42, **body: object
) -> str:
    response = gh.post(
        f"/app/installations/{installation_id}/access_tokens",
        json=body,
        headers={"Authorization": f"Bearer {app_jwt(fake)}"},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["token"])


def authorize(gh: httpx.Client, **params: str) -> httpx.Response:
    query = {"client_id": "Iv1.0123456789abcdef", **params}
    return gh.get("/login/oauth/authorize", params=query)


def redirected(response: httpx.Response) -> tuple[str, dict[str, list[str]]]:
    """Where a 302 leads (without its query), and its query."""
    assert response.status_code == 302, response.text
    parts = urlsplit(response.headers["location"])
    return parts._replace(query="").geturl(), parse_qs(parts.query, keep_blank_values=True)


def code_of(gh: httpx.Client, redirect_uri: str | None = CALLBACK) -> str:
    params = {"state": "s"} if redirect_uri is None else {"redirect_uri": redirect_uri}
    _, query = redirected(authorize(gh, **params))
    return query["code"][0]


def exchange(gh: httpx.Client, fake: FakeGitHub, code: str, **extra: str) -> dict[str, Any]:
    form = {
        "client_id": fake.oauth_client_id,
        "client_secret": fake.oauth_client_secret,
        "code": code,
        **extra,
    }
    response = gh.post(
        "/login/oauth/access_token", data=form, headers={"Accept": "application/json"}
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    answer: dict[str, Any] = response.json()
    return answer


def as_user(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json"}


# -- the web flow ------------------------------------------------------------------------------


def test_the_whole_flow_signs_the_person_in(fake: FakeGitHub, gh: httpx.Client) -> None:
    where, query = redirected(authorize(gh, redirect_uri=CALLBACK, state="st-123"))
    assert where == CALLBACK
    assert query["state"] == ["st-123"]
    code = query["code"][0]
    assert re.fullmatch(r"[0-9a-f]{20}", code)

    answer = exchange(gh, fake, code, redirect_uri=CALLBACK)
    assert set(answer) == {
        "access_token",
        "expires_in",
        "refresh_token",
        "refresh_token_expires_in",
        "scope",
        "token_type",
    }
    assert re.fullmatch(r"ghu_[A-Za-z0-9]{36}", answer["access_token"])
    assert answer["refresh_token"].startswith("ghr_")
    assert answer["expires_in"] == 28800
    assert answer["refresh_token_expires_in"] == 15811200
    assert (answer["scope"], answer["token_type"]) == ("", "bearer")
    assert fake.user_tokens[answer["access_token"]].login == "Alice"

    me = gh.get("/user", headers=as_user(answer["access_token"]))
    assert me.status_code == 200, me.text
    assert me.json()["login"] == "Alice"
    assert me.json()["type"] == "User"
    assert fake.calls_to("GET", "/user")[0].auth == "user"


def test_without_redirect_uri_the_first_callback_gets_the_code(
    fake: FakeGitHub, gh: httpx.Client
) -> None:
    where, query = redirected(authorize(gh, state="s"))
    assert where == CALLBACK
    code = query["code"][0]
    # The code belongs to the first callback: another registered one is a mismatch.
    assert exchange(gh, fake, code, redirect_uri=OTHER_CALLBACK)["error"] == (
        "redirect_uri_mismatch"
    )
    assert "access_token" in exchange(gh, fake, code, redirect_uri=CALLBACK)


def test_the_state_is_echoed_verbatim_and_the_callbacks_query_kept(
    fake: FakeGitHub, gh: httpx.Client
) -> None:
    fake.oauth_callback_urls = ["https://bot.example/cb?tenant=7"]
    state = "not what the app sent & odd=chars/é+%"
    where, query = redirected(
        authorize(gh, redirect_uri="https://bot.example/cb?tenant=7", state=state)
    )
    assert where == "https://bot.example/cb"
    assert query["tenant"] == ["7"]
    assert query["state"] == [state]  # the fake does not judge the state: the app must
    assert len(query["code"]) == 1

    _, no_state = redirected(authorize(gh, redirect_uri="https://bot.example/cb?tenant=7"))
    assert "state" not in no_state


def test_a_redirect_uri_not_registered_is_sent_back_with_an_error(
    fake: FakeGitHub, gh: httpx.Client
) -> None:
    for wrong in ("https://evil.example/cb", CALLBACK + "/deeper", CALLBACK.upper()):
        where, query = redirected(authorize(gh, redirect_uri=wrong, state="keep-me"))
        assert where == CALLBACK
        assert query["error"] == ["redirect_uri_mismatch"]
        assert query["error_description"] == [
            "The redirect_uri MUST match the registered callback URL for this application."
        ]
        assert query["error_uri"][0].startswith("https://docs.github.com/")
        assert query["state"] == ["keep-me"]
        assert "code" not in query
    assert fake.oauth_codes == {}


def test_authorize_refuses_an_unknown_client_no_callback_and_no_sign_in(
    fake: FakeGitHub, gh: httpx.Client
) -> None:
    missing = gh.get("/login/oauth/authorize", params={"redirect_uri": CALLBACK})
    assert missing.status_code == 404
    unknown = gh.get(
        "/login/oauth/authorize", params={"client_id": "Iv1.ffffffffffffffff", "state": "s"}
    )
    assert unknown.status_code == 404
    assert not unknown.headers["content-type"].startswith("application/json")

    fake.web_user = None
    signed_out = authorize(gh, redirect_uri=CALLBACK, state="s")
    assert signed_out.status_code == 401
    assert "sign in to GitHub first" in signed_out.text

    fake.web_user = "alice"
    fake.oauth_callback_urls = []
    assert authorize(gh, state="s").status_code == 404
    assert authorize(gh, redirect_uri=CALLBACK).status_code == 404
    assert fake.oauth_codes == {}


# -- the code exchange -------------------------------------------------------------------------


def test_a_code_works_once(fake: FakeGitHub, gh: httpx.Client) -> None:
    code = code_of(gh)
    assert "access_token" in exchange(gh, fake, code)
    again = exchange(gh, fake, code)
    assert again["error"] == "bad_verification_code"
    assert again["error_description"] == "The code passed is incorrect or expired."
    assert again["error_uri"].startswith("https://docs.github.com/")
    assert "access_token" not in again
    assert exchange(gh, fake, "0" * 20)["error"] == "bad_verification_code"
    assert len(fake.user_tokens) == 1


def test_a_code_is_good_only_for_the_client_it_was_issued_to(
    fake: FakeGitHub, gh: httpx.Client
) -> None:
    code = code_of(gh)
    fake.oauth_client_id = "Iv1.fedcba9876543210"  # now another client of the fake's
    assert exchange(gh, fake, code)["error"] == "bad_verification_code"
    fake.oauth_client_id = "Iv1.0123456789abcdef"
    assert "access_token" in exchange(gh, fake, code)


def test_a_code_expires_after_its_ttl(
    fake: FakeGitHub, gh: httpx.Client, clock: list[float]
) -> None:
    fresh, stale = code_of(gh), code_of(gh)
    clock[0] += 600 - 1
    assert "access_token" in exchange(gh, fake, fresh)
    clock[0] += 2
    assert exchange(gh, fake, stale)["error"] == "bad_verification_code"

    fake.oauth_code_ttl_s = 5
    short = code_of(gh)
    clock[0] += 6
    assert exchange(gh, fake, short)["error"] == "bad_verification_code"


def test_a_wrong_redirect_uri_fails_but_keeps_the_code(fake: FakeGitHub, gh: httpx.Client) -> None:
    code = code_of(gh, OTHER_CALLBACK)
    wrong = exchange(gh, fake, code, redirect_uri=CALLBACK)
    assert wrong["error"] == "redirect_uri_mismatch"
    assert "access_token" not in wrong
    assert "access_token" in exchange(gh, fake, code, redirect_uri=OTHER_CALLBACK)


def test_wrong_client_credentials_are_refused_and_keep_the_code(
    fake: FakeGitHub, gh: httpx.Client
) -> None:
    code = code_of(gh)
    for creds in (
        {"client_secret": "cs_" + "1" * 37},
        {"client_id": "Iv1.ffffffffffffffff"},
        {"client_secret": ""},
    ):
        form = {
            "client_id": fake.oauth_client_id,
            "client_secret": fake.oauth_client_secret,
            "code": code,
            **creds,
        }
        response = gh.post(
            "/login/oauth/access_token", data=form, headers={"Accept": "application/json"}
        )
        assert response.status_code == 200  # GitHub's errors here are 200s
        assert response.json()["error"] == "incorrect_client_credentials"
        assert "access_token" not in response.json()
    assert "access_token" in exchange(gh, fake, code)


def test_the_exchange_answers_form_text_unless_json_is_accepted_and_takes_json(
    fake: FakeGitHub, gh: httpx.Client
) -> None:
    code = code_of(gh)
    body = {
        "client_id": fake.oauth_client_id,
        "client_secret": fake.oauth_client_secret,
        "code": code,
    }
    as_form = gh.post("/login/oauth/access_token", json=body)  # a JSON body, no Accept
    assert as_form.headers["content-type"].startswith("application/x-www-form-urlencoded")
    fields = parse_qs(as_form.text, keep_blank_values=True)
    assert fields["access_token"][0].startswith("ghu_")
    assert fields["expires_in"] == ["28800"]
    assert fields["token_type"] == ["bearer"]
    assert fields["scope"] == [""]

    failed = gh.post("/login/oauth/access_token", data={**body, "code": code})
    assert parse_qs(failed.text)["error"] == ["bad_verification_code"]


# -- user tokens -------------------------------------------------------------------------------


def test_a_user_token_expires_after_8_hours_and_can_be_revoked(
    fake: FakeGitHub, gh: httpx.Client, clock: list[float]
) -> None:
    token = exchange(gh, fake, code_of(gh))["access_token"]
    clock[0] += 8 * 3600 - 5
    assert gh.get("/user", headers=as_user(token)).status_code == 200
    clock[0] += 10
    late = gh.get("/user", headers=as_user(token))
    assert late.status_code == 401
    assert late.json()["message"] == "Bad credentials"

    clock[0] -= 8 * 3600
    other = fake.issue_user_token("bob")
    assert gh.get("/user", headers={"Authorization": f"token {other}"}).json()["login"] == "bob"
    fake.revoke_user_tokens()
    assert gh.get("/user", headers=as_user(other)).status_code == 401


def test_user_routes_refuse_installation_tokens_and_no_token(
    fake: FakeGitHub, gh: httpx.Client
) -> None:
    ghs = installation_token(gh, fake)
    for scheme in ("token", "Bearer"):
        refused = gh.get("/user", headers={"Authorization": f"{scheme} {ghs}"})
        assert refused.status_code == 403
        assert refused.json()["message"] == "Resource not accessible by integration"
    assert gh.get("/user/installations", headers=as_user(ghs)).status_code == 403
    assert gh.get("/user").status_code == 401
    assert gh.get("/user", headers=as_user("ghu_" + "x" * 36)).status_code == 401
    assert gh.get("/user", headers=as_user(app_jwt(fake))).status_code == 401
    fake.revoke_tokens()
    assert gh.get("/user", headers=as_user(ghs)).status_code == 401


def test_user_installations_and_repository_permissions(
    fake: FakeGitHub, gh: httpx.Client, tmp_path: Path
) -> None:
    for owner, name in (("octo", "other"), ("acme", "tools"), ("acme", "docs"), ("zeta", "z")):
        bare = init_bare_repo(tmp_path / "remote" / owner / f"{name}.git", {"a": "a\n"})
        fake.add_repo(owner, name, bare)
    fake.add_installation(42, "octo", ["octo/hello", "octo/other"])
    fake.add_installation(7, "acme", ["acme/tools", "acme/docs"])
    fake.add_installation(9, "zeta", ["zeta/z"])
    fake.set_permission("octo", "hello", "alice", "write")
    fake.set_permission("acme", "tools", "ALICE", "admin")
    fake.set_permission("acme", "docs", "alice", "triage")
    fake.set_permission("zeta", "z", "bob", "admin")  # not alice's
    token = fake.issue_user_token("Alice")

    listed = gh.get("/user/installations", headers=as_user(token))
    assert listed.status_code == 200, listed.text
    assert listed.json()["total_count"] == 2
    assert [i["id"] for i in listed.json()["installations"]] == [7, 42]
    first = gh.get("/user/installations", params={"per_page": 1}, headers=as_user(token))
    assert [i["id"] for i in first.json()["installations"]] == [7]
    assert 'rel="next"' in first.headers["link"]

    octo = gh.get("/user/installations/42/repositories", headers=as_user(token)).json()
    assert octo["total_count"] == 1  # octo/other: no permission of alice's
    (hello,) = octo["repositories"]
    assert hello["full_name"] == "octo/hello"
    assert hello["permissions"] == {
        "admin": False,
        "maintain": False,
        "push": True,
        "triage": True,
        "pull": True,
    }
    acme = gh.get("/user/installations/7/repositories", headers=as_user(token)).json()
    perms = {r["full_name"]: r["permissions"] for r in acme["repositories"]}
    assert perms["acme/tools"] == dict.fromkeys(
        ("admin", "maintain", "push", "triage", "pull"), True
    )
    assert perms["acme/docs"] == {
        "admin": False,
        "maintain": False,
        "push": False,
        "triage": True,
        "pull": True,
    }
    for unreachable in (9, 12345):
        answer = gh.get(f"/user/installations/{unreachable}/repositories", headers=as_user(token))
        assert answer.status_code == 404

    fake.set_permission("octo", "hello", "alice", "maintain")
    octo = gh.get("/user/installations/42/repositories", headers=as_user(token)).json()
    assert octo["repositories"][0]["permissions"]["maintain"] is True
    assert octo["repositories"][0]["permissions"]["admin"] is False


# -- organisations -----------------------------------------------------------------------------


def test_the_org_installation_needs_the_app_jwt(fake: FakeGitHub, gh: httpx.Client) -> None:
    jwt_auth = {"Authorization": f"Bearer {app_jwt(fake)}"}
    found = gh.get("/orgs/OCTO/installation", headers=jwt_auth)
    assert found.status_code == 200, found.text
    assert found.json()["id"] == 42
    assert gh.get("/orgs/nobody/installation", headers=jwt_auth).status_code == 404
    ghs = installation_token(gh, fake)
    assert gh.get("/orgs/octo/installation", headers=as_user(ghs)).status_code == 401


def test_org_membership_answers_204_or_404(fake: FakeGitHub, gh: httpx.Client) -> None:
    fake.add_org_member("Octo", "Alice")
    headers = {"Authorization": f"token {installation_token(gh, fake)}"}
    assert gh.get("/orgs/octo/members/alice", headers=headers).status_code == 204
    assert gh.get("/orgs/OCTO/members/ALICE", headers=headers).status_code == 204
    assert gh.get("/orgs/octo/members/mallory", headers=headers).status_code == 404
    fake.remove_org_member("octo", "ALICE")
    assert gh.get("/orgs/octo/members/alice", headers=headers).status_code == 404
    assert gh.get("/orgs/octo/members/alice").status_code == 401


def test_membership_of_another_account_is_not_found(
    fake: FakeGitHub, gh: httpx.Client, tmp_path: Path
) -> None:
    fake.add_repo("acme", "tools", init_bare_repo(tmp_path / "acme.git", {"a": "a\n"}))
    fake.add_installation(7, "acme", ["acme/tools"])
    fake.add_org_member("acme", "alice")
    fake.add_team_member("acme", "core", "alice")
    octo_token = {"Authorization": f"token {installation_token(gh, fake, 42)}"}
    acme_token = {"Authorization": f"token {installation_token(gh, fake, 7)}"}
    assert gh.get("/orgs/acme/members/alice", headers=octo_token).status_code == 404
    assert gh.get("/orgs/acme/members/alice", headers=acme_token).status_code == 204
    team = "/orgs/acme/teams/core/memberships/alice"
    assert gh.get(team, headers=octo_token).status_code == 404
    assert gh.get(team, headers=acme_token).status_code == 200


def test_team_membership_has_a_role_and_follows_the_org(fake: FakeGitHub, gh: httpx.Client) -> None:
    fake.add_team_member("octo", "Reviewers", "Alice", role="maintainer")
    fake.add_team_member("octo", "reviewers", "bob")
    headers = {"Authorization": f"token {installation_token(gh, fake)}"}
    alice = gh.get("/orgs/octo/teams/reviewers/memberships/alice", headers=headers)
    assert alice.status_code == 200, alice.text
    assert alice.json()["role"] == "maintainer"
    assert alice.json()["state"] == "active"
    assert alice.json()["url"].startswith("https://api.github.com/")
    bob = gh.get("/orgs/octo/teams/REVIEWERS/memberships/Bob", headers=headers)
    assert bob.json()["role"] == "member"
    assert gh.get("/orgs/octo/members/bob", headers=headers).status_code == 204  # in the org

    for path in (
        "/orgs/octo/teams/reviewers/memberships/carol",  # not in the team
        "/orgs/octo/teams/nope/memberships/alice",  # no such team
    ):
        missing = gh.get(path, headers=headers)
        assert missing.status_code == 404
        assert missing.json()["message"] == "Not Found"

    fake.remove_team_member("octo", "reviewers", "bob")
    assert gh.get("/orgs/octo/teams/reviewers/memberships/bob", headers=headers).status_code == 404
    assert gh.get("/orgs/octo/members/bob", headers=headers).status_code == 204  # still in org
    fake.remove_org_member("octo", "alice")  # leaving the org leaves its teams
    assert gh.get("/orgs/octo/teams/reviewers/memberships/alice", headers=headers).status_code == (
        404
    )
    with pytest.raises(ValueError):
        fake.add_team_member("octo", "reviewers", "dave", role="owner")


def test_a_narrowed_token_needs_the_members_permission(fake: FakeGitHub, gh: httpx.Client) -> None:
    fake.add_team_member("octo", "core", "alice")
    narrow = installation_token(gh, fake, permissions={"issues": "read"})
    members = installation_token(gh, fake, permissions={"members": "read"})
    for path in ("/orgs/octo/members/alice", "/orgs/octo/teams/core/memberships/alice"):
        refused = gh.get(path, headers={"Authorization": f"token {narrow}"})
        assert refused.status_code == 403
        assert gh.get(path, headers={"Authorization": f"token {members}"}).status_code in (200, 204)


def test_the_manifest_conversion_hands_out_the_oauth_client(
    fake: FakeGitHub, gh: httpx.Client
) -> None:
    fake.oauth_client_id = "Iv1.aaaaaaaaaaaaaaaa"
    fake.register_manifest_code("abc")
    converted = gh.post("/app-manifests/abc/conversions").json()
    assert converted["client_id"] == "Iv1.aaaaaaaaaaaaaaaa"
    assert converted["client_secret"] == fake.oauth_client_secret == "cs_" + "0" * 37


@pytest.mark.anyio
async def test_githubkits_calls_pass_the_description_and_parse(fake: FakeGitHub) -> None:
    """The app's client for these routes is githubkit: its requests must be GitHub's and the
    fake's answers must fit its models. (Its web-flow strategy exchanges through a client of
    its own auth, which sends the code twice, so it is given an unauthenticated one.)"""
    from githubkit import (
        AppAuthStrategy,
        GitHub,
        OAuthWebAuthStrategy,
        TokenAuthStrategy,
        UnauthAuthStrategy,
    )
    from githubkit.utils import Unset

    fake.add_team_member("octo", "core", "alice", role="maintainer")
    fake.set_permission("octo", "hello", "alice", "admin")
    with serve_fake_github(fake) as url:
        with httpx.Client(base_url=url, trust_env=False) as gh:
            code = code_of(gh)
        web = OAuthWebAuthStrategy(fake.oauth_client_id, fake.oauth_client_secret, code, CALLBACK)
        token = (await web.async_exchange_token(GitHub(UnauthAuthStrategy(), base_url=url))).token
        assert token is not None
        as_person = GitHub(TokenAuthStrategy(token), base_url=url)
        user = as_person.rest
        assert (await user.users.async_get_authenticated()).parsed_data.login == "Alice"
        listed = await user.apps.async_list_installations_for_authenticated_user(per_page=100)
        assert [i.id for i in listed.parsed_data.installations] == [42]
        repos = await user.apps.async_list_installation_repos_for_authenticated_user(42)
        (hello,) = repos.parsed_data.repositories
        perms = hello.permissions
        assert perms is not None and not isinstance(perms, Unset) and perms.admin is True
        app = GitHub(AppAuthStrategy(str(fake.app_id), fake.private_key_pem), base_url=url)
        installation = (await app.rest.apps.async_get_org_installation("octo")).parsed_data
        as_installation = app.with_auth(app.auth.as_installation(installation.id))
        org = as_installation.rest
        assert (await org.orgs.async_check_membership_for_user("octo", "alice")).status_code == 204
        team = await org.teams.async_get_membership_for_user_in_org("octo", "core", "alice")
        assert team.parsed_data.role == "maintainer"
