"""The `bot doctor` GitHub App check against the fake GitHub."""

from __future__ import annotations

import httpx
import pytest

from bot.ops.doctor import DoctorContext, run_checks
from bot.ops.doctor_checks import check_github_app, make_github_check
from bot.settings import Settings
from tests.fakes.github import FakeGitHub, new_private_key_pem

pytestmark = pytest.mark.anyio


def settings_for(fake: FakeGitHub, **extra: object) -> Settings:
    values: dict[str, object] = {
        "app_id": fake.app_id,
        "private_key": fake.private_key_pem,
        "webhook_secret": "s3cret-value",
        "github_api_url": "http://github.test",
        **extra,
    }
    return Settings.model_validate(values)


@pytest.fixture
def fake() -> FakeGitHub:
    fake = FakeGitHub()
    fake.add_installation(42, "octo", [])
    fake.add_installation(43, "acme", [])
    return fake


async def test_reports_the_app_and_its_installations(fake: FakeGitHub) -> None:
    check = make_github_check(httpx.ASGITransport(fake.app))
    result = await check(DoctorContext(settings=settings_for(fake)))
    assert result.status == "ok"
    assert "App repo-agent (id 1001)" in result.detail
    assert "octo (id 42" in result.detail and "acme (id 43" in result.detail
    assert [c.auth for c in fake.calls] == ["jwt", "jwt"]


async def test_a_key_of_another_app_fails_with_advice(fake: FakeGitHub) -> None:
    check = make_github_check(httpx.ASGITransport(fake.app))
    other = FakeGitHub(private_key_pem=new_private_key_pem())
    result = await check(
        DoctorContext(settings=settings_for(fake, private_key=other.private_key_pem))
    )
    assert result.status == "fail"
    assert "BOT_APP_ID" in result.fix


async def test_a_key_that_is_not_pem_fails(fake: FakeGitHub) -> None:
    check = make_github_check(httpx.ASGITransport(fake.app))
    result = await check(DoctorContext(settings=settings_for(fake, private_key="not a key")))
    assert result.status == "fail" and "PEM" in result.detail
    assert fake.calls == []


async def test_missing_credentials_are_a_warning_pointing_to_setup() -> None:
    result = await check_github_app(DoctorContext(settings=Settings()))
    assert result.status == "warn"
    assert "bot setup" in result.fix


async def test_a_wrong_slug_and_no_installations_warn(fake: FakeGitHub) -> None:
    check = make_github_check(httpx.ASGITransport(fake.app))
    result = await check(DoctorContext(settings=settings_for(fake, app_slug="other-name")))
    assert result.status == "warn" and "BOT_APP_SLUG" in result.detail
    fake.installations.clear()
    result = await check(DoctorContext(settings=settings_for(fake)))
    assert result.status == "warn" and "installations/new" in result.fix


async def test_the_check_runs_under_bot_doctor(fake: FakeGitHub) -> None:
    check = make_github_check(httpx.ASGITransport(fake.app))
    results = await run_checks(DoctorContext(settings=settings_for(fake)), [check])
    assert [(r.name, r.status) for r in results] == [("github app", "ok")]
