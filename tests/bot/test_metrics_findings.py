"""`bot_review_findings_total{outcome=...}` on `GET /metrics`: read from the store at each
scrape, over every repository, with no label naming one (on both backends)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from policies.finding_fates import FindingFate
from tests.bot.test_metrics import client, page
from tests.scripted import metric_sample

pytestmark = pytest.mark.anyio


def fate(repo: str, fp: str, outcome: str) -> FindingFate:
    return FindingFate(repo, 1, fp, "a.py", "bug", "high", "t", outcome, pull="merged")  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_findings_counter_reads_the_store(
    backend: str, data_dir: Path, request: pytest.FixtureRequest
) -> None:
    dsn = request.getfixturevalue("postgres_dsn") if backend == "postgres" else None
    async with client(data_dir, dsn) as (http, store):
        empty = await page(http)
        assert metric_sample(empty, "bot_review_findings_total", outcome="posted") == 0
        store.put_finding_fates(
            "octo/private-one",
            1,
            [fate("octo/private-one", "f1", "fixed"), fate("octo/private-one", "f2", "dismissed")],
        )
        store.put_finding_fates("octo/private-two", 1, [fate("octo/private-two", "f3", "fixed")])
        full = await page(http)
    assert metric_sample(full, "bot_review_findings_total", outcome="posted") == 3
    assert metric_sample(full, "bot_review_findings_total", outcome="fixed") == 2
    assert metric_sample(full, "bot_review_findings_total", outcome="dismissed") == 1
    assert metric_sample(full, "bot_review_findings_total", outcome="open_at_close") == 0
    assert "private-one" not in full and "private-two" not in full
    labels = set(re.findall(r"^bot_review_findings_total\{([^}]*)\}", full, re.MULTILINE))
    assert labels == {
        f'outcome="{o}"' for o in ("posted", "fixed", "dismissed", "outdated", "open_at_close")
    }
