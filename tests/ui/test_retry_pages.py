"""The operator page's Retry buttons (CSRF like Stop, refused while a run is running,
recorded) and its list of refused deliveries, through the page's ASGI app."""

from __future__ import annotations

import re

import httpx

from bot.store.backend import job_queue
from bot.store.queue.base import JobStatus
from bot.store.refusals import Refusal
from tests.backends import end_job, take_job
from tests.ui.conftest import NOW, Seeded, sign_in
from tests.ui.seed import add_delivery, add_run


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found is not None
    return found.group(1)


def _dead(seeded: Seeded, guid: str) -> None:
    add_delivery(seeded.store, guid, received_at=NOW - 30, decision="error", reason="gave up")
    job_queue(seeded.store).enqueue_sync(guid)
    end_job(seeded.store, take_job(seeded.store), "dead")


def test_a_dead_delivery_gets_a_retry_button_that_needs_the_csrf_token(
    client: httpx.Client, seeded: Seeded
) -> None:
    _dead(seeded, "d-dead")
    sign_in(client)
    html = client.get("/ui/deliveries/d-dead").text
    assert 'id="retry"' in html and "its delivery job is dead" in html
    for wrong in ("", "0" * 64):
        refused = client.post(
            "/ui/deliveries/d-dead/retry", data={"csrf": wrong}, follow_redirects=False
        )
        assert refused.status_code == 403
    assert len(job_queue(seeded.store).jobs_for_delivery("d-dead")) == 1

    done = client.post(
        "/ui/deliveries/d-dead/retry", data={"csrf": _csrf(html)}, follow_redirects=False
    )
    assert (done.status_code, done.headers["location"]) == (303, "/ui/deliveries/d-dead")
    jobs = job_queue(seeded.store).jobs_for_delivery("d-dead")
    assert [(j.kind, j.status) for j in jobs][-1] == ("retry-1", JobStatus.QUEUED)
    after = client.get("/ui/deliveries/d-dead").text
    assert 'id="retry"' not in after  # queued now
    assert re.search(r"<td>retry-1</td><td>ui</td><td>its delivery job is dead</td>", after)

    again = client.post("/ui/deliveries/d-dead/retry", data={"csrf": _csrf(html)})
    assert again.status_code == 409 and "its retry-1 job is queued" in again.text
    assert len(job_queue(seeded.store).jobs_for_delivery("d-dead")) == 2
    # The audit has the sign-in and the one retry done, not the refused ones.
    assert [(e.actor, e.action, e.target) for e in reversed(seeded.store.audit_entries())] == [
        ("(shared token)", "sign-in", ""),
        ("(shared token)", "retry", "d-dead"),
    ]


def test_a_failed_run_is_retried_from_its_page_and_a_running_one_is_refused(
    client: httpx.Client, seeded: Seeded
) -> None:
    store = seeded.store
    add_delivery(store, "d-failed", received_at=NOW - 20, decision="trigger", workflow="ask")
    job_queue(store).enqueue_sync("d-failed")
    end_job(store, take_job(store), "done")
    failed = add_run(store, "d-failed", workflow="ask", status="failed", created_at=NOW - 20)
    sign_in(client)
    html = client.get(f"/ui/runs/{failed}").text
    assert 'id="retry"' in html and f"run {failed} failed" in html
    done = client.post(
        f"/ui/runs/{failed}/retry", data={"csrf": _csrf(html)}, follow_redirects=False
    )
    assert (done.status_code, done.headers["location"]) == (303, f"/ui/runs/{failed}")
    run = store.get_run(failed)
    assert run is not None and run.status == "queued"

    # The seeded running run: no Retry button, and a POST is refused.
    page = client.get(f"/ui/runs/{seeded.running}").text
    assert 'id="retry"' not in page and 'id="stop-run"' in page
    refused = client.post(f"/ui/runs/{seeded.running}/retry", data={"csrf": _csrf(page)})
    assert refused.status_code == 409
    assert f"Not retried: run {seeded.running} is running." in refused.text
    assert (
        client.post("/ui/runs/wf_0123456789ab/retry", data={"csrf": _csrf(page)}).status_code == 404
    )


def test_refused_deliveries_are_listed_under_their_filter_escaped(
    client: httpx.Client, seeded: Seeded
) -> None:
    seeded.store.record_refusals(
        [
            Refusal(
                NOW - 9,
                "192.0.2.1",
                "issues",
                "72d3162e-cc78-11e3-81ab-4c9367dc0958",
                401,
                "bad_signature",
            ),
            Refusal(NOW - 8, "192.0.2.2", "<script>x</script>", None, 400, "unknown_event"),
        ]
    )
    sign_in(client)
    assert 'href="/ui/refusals"' in client.get("/ui/deliveries").text
    html = client.get("/ui/refusals").text
    rows = re.findall(r'<tr class="refusal" data-status="(\d+)">', html)
    assert rows == ["400", "401"]  # newest first
    assert "<script>x</script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
    assert "72d3162e-cc78-11e3-81ab-4c9367dc0958" in html and "192.0.2.1" in html
    only = client.get("/ui/refusals?status=401").text
    assert re.findall(r'data-status="(\d+)"', only) == ["401"]
    assert client.get("/ui/refusals?status=4O1").status_code == 400
