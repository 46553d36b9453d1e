"""The lists' context (sender, command, title, actor, outcome, what was posted), the one search
box, and the rows the lists poll for."""

from __future__ import annotations

import json
import re

import httpx

from bot.store.records import PUBLISHED_ARTIFACT
from tests.backends import query
from tests.ui.conftest import NOW, Seeded, sign_in
from tests.ui.seed import add_delivery, add_run


def add_command(seeded: Seeded) -> str:
    add_delivery(
        seeded.store,
        "d-cmd",
        received_at=NOW - 10,
        event="issue_comment",
        action="created",
        body={
            "action": "created",
            "issue": {"number": 4, "title": "Parser drops <b>tabs</b>"},
            "comment": {"body": "Thanks.\n\n@repo-agent fix keep the tabs\n"},
            "repository": {"full_name": "octo/app"},
            "sender": {"login": "carol"},
        },
        decision="trigger",
        workflow="fix",
    )
    run = add_run(seeded.store, "d-cmd", workflow="fix", number=4, created_at=NOW - 10)
    seeded.store.update_run(run, status="needs_info")
    seeded.store.put_artifact(
        run,
        PUBLISHED_ARTIFACT,
        json.dumps({"comment_url": "https://github.com/octo/app/issues/4#issuecomment-77"}),
    )
    return run


def row(html: str, marker: str) -> str:
    found = re.search(rf"<tr class=\"[a-z]+\" {marker}>(.*?)</tr>", html, re.DOTALL)
    assert found is not None, marker
    return found.group(1)


def test_deliveries_show_sender_command_repository_and_title(
    client: httpx.Client, seeded: Seeded
) -> None:
    add_command(seeded)
    sign_in(client)
    html = client.get("/ui/deliveries").text
    cmd = row(html, 'data-guid="d-cmd"')
    assert "<code>@repo-agent fix keep the tabs</code>" in cmd
    assert '<td class="sender">carol</td>' in cmd
    assert "octo/app" in cmd and "Parser drops &lt;b&gt;tabs&lt;/b&gt;" in cmd
    assert '<td class="sender">someone</td>' in row(html, 'data-guid="d-1"')
    assert '<div class="command">' not in row(html, 'data-guid="d-1"')  # not a comment


def test_runs_show_title_actor_outcome_kind_and_what_was_posted(
    client: httpx.Client, seeded: Seeded
) -> None:
    run = add_command(seeded)
    sign_in(client)
    html = client.get("/ui/runs").text
    mine = row(html, f'data-run="{run}"')
    assert "Parser drops &lt;b&gt;tabs&lt;/b&gt;" in mine
    assert '<td class="actor">carol</td>' in mine
    assert '<span class="status s-needs_info">needs_info</span>' in mine
    assert 'href="https://github.com/octo/app/issues/4#issuecomment-77"' in mine
    running = row(html, f'data-run="{seeded.running}"')
    assert 'class="status s-' not in running.split('<td class="outcome">')[1].split("</td>")[0]
    assert "posted" not in row(html, f'data-run="{seeded.finished}"').split("outcome")[1]


def test_a_posted_link_that_is_not_http_is_not_linked(client: httpx.Client, seeded: Seeded) -> None:
    seeded.store.put_artifact(
        seeded.finished, PUBLISHED_ARTIFACT, json.dumps({"comment_url": "javascript:alert(1)"})
    )
    sign_in(client)
    assert "javascript:" not in client.get("/ui/runs").text


def test_search_opens_a_delivery_a_run_or_lists_a_targets_runs(
    client: httpx.Client, seeded: Seeded
) -> None:
    run = add_command(seeded)
    sign_in(client)
    found = client.get("/ui/search", params={"q": "d-cmd"}, follow_redirects=False)
    assert found.status_code == 303 and found.headers["location"] == "/ui/deliveries/d-cmd"
    found = client.get("/ui/search", params={"q": f" {run} "}, follow_redirects=False)
    assert found.status_code == 303 and found.headers["location"] == f"/ui/runs/{run}"
    for q in ("octo/app#4", "https://github.com/octo/app/issues/4#issuecomment-77"):
        listed = client.get("/ui/search", params={"q": q})
        assert listed.status_code == 200
        assert f'data-run="{run}"' in listed.text and seeded.finished not in listed.text
    pulls = client.get("/ui/search", params={"q": "https://github.com/octo/app/pull/3"}).text
    assert f'data-run="{seeded.running}"' in pulls  # a pull request's runs by its URL
    missing = client.get("/ui/search", params={"q": "wf_000000000000"})
    assert missing.status_code == 200 and "No run has that id." in missing.text
    assert "No delivery has that GUID." in client.get("/ui/search", params={"q": "nope"}).text


def test_a_search_with_sql_or_html_in_it_is_harmless(client: httpx.Client, seeded: Seeded) -> None:
    sign_in(client)
    before = query(seeded.store, "SELECT count(*) FROM runs")
    for q in (
        "' OR '1'='1",
        "d-1' OR 1=1 --",
        "x'; DROP TABLE runs; --",
        "octo/app#1; DELETE FROM deliveries",
        "<script>alert(1)</script>",
        '"><img src=x onerror=alert(1)>',
    ):
        answer = client.get("/ui/search", params={"q": q}, follow_redirects=False)
        assert answer.status_code == 200, q
        assert "<script>alert" not in answer.text and "<img src=x" not in answer.text
        assert "is not a delivery GUID" in answer.text
    # A GUID-shaped search that is SQL-ish still only matches itself.
    assert client.get("/ui/search", params={"q": "d-1--"}).status_code == 200
    assert query(seeded.store, "SELECT count(*) FROM runs") == before
    assert client.get("/ui/search", params={"q": "a\x00b"}).status_code == 400


def test_the_lists_rows_for_the_poll(client: httpx.Client, seeded: Seeded) -> None:
    assert client.get("/ui/live/runs").status_code == 401  # not signed in: no redirect
    sign_in(client)
    first = client.get("/ui/runs?workflow=fix").text
    assert 'data-refresh="/ui/live/runs?workflow=fix"' in first
    older = client.get("/ui/runs", params={"before": f"{NOW}~wf_zzz"}).text
    assert "data-refresh" not in older  # a page of older rows stays as read
    rows = client.get("/ui/live/runs?workflow=fix")
    assert rows.headers["content-type"] == "application/json"
    assert seeded.writer in rows.json()["html"] and seeded.finished not in rows.json()["html"]
    run = add_command(seeded)
    assert run in client.get("/ui/live/runs?workflow=fix").json()["html"]
    deliveries = client.get("/ui/live/deliveries?decision=trigger").json()["html"]
    assert "d-cmd" in deliveries and "d-skip" not in deliveries
    assert 'data-refresh="/ui/live/deliveries"' in client.get("/ui/deliveries").text
