"""The operator page's findings: figures per repository, category and severity, the
resolution rate, the listing, a repository filter, and model-written titles kept inert."""

from __future__ import annotations

import httpx

from policies.finding_fates import FindingFate
from tests.ui.conftest import Seeded, sign_in
from tests.ui.seed import HOSTILE, PLANTED_TOKEN


def fate(repo: str, fp: str, outcome: str, pull: str, **kw: object) -> FindingFate:
    fields: dict[str, object] = {
        "repo": repo,
        "number": 5,
        "fingerprint": fp,
        "path": "calc/ops.py",
        "category": "bug",
        "severity": "high",
        "title": f"Finding {fp}",
        "outcome": outcome,
        "pull": pull,
    }
    fields.update(kw)
    return FindingFate(**fields)  # type: ignore[arg-type]


def put(seeded: Seeded) -> None:
    seeded.store.put_finding_fates(
        "octo/app",
        5,
        [
            fate("octo/app", "f1", "fixed", "merged", actor="c" * 40, how="re-check"),
            fate("octo/app", "f2", "dismissed", "merged", actor="maint", how="won't fix"),
            fate("octo/app", "f3", "open_at_close", "merged", category="style", severity="low"),
            fate("octo/app", "f4", "outdated", "merged"),
        ],
    )
    seeded.store.put_finding_fates(
        "evil/repo", 7, [fate("evil/repo", "f5", "open", "open", number=7, title=HOSTILE)]
    )


def test_findings_page_shows_fates_and_rates(client: httpx.Client, seeded: Seeded) -> None:
    put(seeded)
    sign_in(client)
    r = client.get("/ui/findings")
    assert r.status_code == 200
    html = r.text
    assert 'href="/ui/findings"' in html  # in the navigation
    # All: 5 posted, 1 fixed of the 4 on closed pull requests.
    assert "5 posted · 1 fixed · 1 dismissed · 1 outdated · 1 open at close" in html
    assert "resolution rate 25%" in html
    row = "<tr><td>octo/app</td>" + "".join(
        f'<td class="num">{n}</td>' for n in (4, 1, 1, 1, 1, 0, "25%")
    )
    assert row in html
    assert "<tr><td>evil/repo</td>" in html and '<td class="num">—</td></tr>' in html
    assert "<tr><td>style</td>" in html and "<tr><td>low</td>" in html
    assert "won&#39;t fix by @maint" in html and "re-check at cccccccccccc" in html
    # A model-written title is text: no tag, no token.
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert PLANTED_TOKEN not in html


def test_findings_page_of_one_repository(client: httpx.Client, seeded: Seeded) -> None:
    put(seeded)
    sign_in(client)
    html = client.get("/ui/findings", params={"repo": "OCTO/app"}).text
    assert "4 posted" in html and "evil/repo" not in html
    assert client.get("/ui/findings", params={"repo": "bad\x01"}).status_code == 400


def test_findings_page_without_findings(client: httpx.Client, seeded: Seeded) -> None:
    sign_in(client)
    html = client.get("/ui/findings").text
    assert "No findings recorded yet." in html and "resolution rate —" in html
