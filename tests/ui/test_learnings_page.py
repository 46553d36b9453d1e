"""The operator page's learnings: per repository, newest first, a repository filter, and
maintainers' words kept inert."""

from __future__ import annotations

import httpx

from tests.ui.conftest import Seeded, sign_in
from tests.ui.seed import HOSTILE


def put(seeded: Seeded) -> None:
    store = seeded.store
    store.add_learning(
        "octo/app",
        text="intentional: we support Python 3.8 here",
        author="maint",
        source="https://github.com/octo/app/pull/5#discussion_r9",
        category="bug",
        title="walrus needs 3.8",
        paths=["calc/ops.py"],
    )
    store.add_learning(
        "octo/app", text="tests live in t/", author="octo", source="https://x.invalid/1"
    )
    store.add_learning("evil/repo", text=HOSTILE, author="maint", source="javascript:alert(1)")


def test_learnings_page_lists_them_per_repository(client: httpx.Client, seeded: Seeded) -> None:
    put(seeded)
    sign_in(client)
    r = client.get("/ui/learnings")
    assert r.status_code == 200
    html = r.text
    assert 'href="/ui/learnings"' in html  # in the navigation
    assert "<h2>octo/app (2)</h2>" in html and "<h2>evil/repo (1)</h2>" in html
    assert html.index("tests live in t/") < html.index("intentional: we support Python 3.8")
    assert "bug: walrus needs 3.8 <code>calc/ops.py</code>" in html
    assert 'href="https://github.com/octo/app/pull/5#discussion_r9"' in html
    # Only GitHub's addresses are linked; a learning's text is text.
    assert "x.invalid" not in html and 'href="javascript:' not in html
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_learnings_page_of_one_repository(client: httpx.Client, seeded: Seeded) -> None:
    put(seeded)
    sign_in(client)
    html = client.get("/ui/learnings", params={"repo": "OCTO/app"}).text
    assert "octo/app (2)" in html and "evil/repo" not in html
    html = client.get("/ui/learnings", params={"repo": "octo/none"}).text
    assert "No learnings kept yet." in html
