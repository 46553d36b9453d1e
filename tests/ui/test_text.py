"""bot/ui/text.py: Markdown without HTML, images or unsafe links; redaction around rendering."""

from __future__ import annotations

import pytest

from bot.redact import Redactor
from bot.ui.text import diff_html, markdown, pretty_json
from tests.ui.seed import PLANTED_TOKEN

REDACT = Redactor([])


@pytest.mark.parametrize(
    "link",
    [
        pytest.param("javascript:alert(1)", id="javascript"),
        pytest.param("JaVaScRiPt:alert(1)", id="mixed-case"),
        pytest.param("java%0Ascript:alert(1)", id="encoded-newline"),
        pytest.param("vbscript:msgbox(1)", id="vbscript"),
        pytest.param("data:text/html;base64,PHNjcmlwdD4=", id="data"),
        pytest.param("file:///etc/passwd", id="file"),
    ],
)
def test_unsafe_links_are_not_links(link: str) -> None:
    html = markdown(f"[click]({link})", REDACT)
    assert "<a " not in html
    assert "click" in html


@pytest.mark.parametrize(
    ("link", "href"),
    [
        pytest.param("https://example.com/x", "https://example.com/x", id="https"),
        pytest.param("mailto:a@example.com", "mailto:a@example.com", id="mailto"),
        pytest.param("/ui/runs", "/ui/runs", id="relative"),
        pytest.param("#top", "#top", id="fragment"),
    ],
)
def test_safe_links_stay_with_rel(link: str, href: str) -> None:
    html = markdown(f"[go]({link})", REDACT)
    assert f'href="{href}"' in html
    assert 'rel="nofollow noopener noreferrer"' in html


def test_html_and_images_are_text() -> None:
    html = markdown(
        '<script>alert(1)</script> <b onclick="x()">b</b> ![i](https://e.x/i.png)', REDACT
    )
    assert "<script>" not in html and "<b " not in html and "<img" not in html
    assert "&lt;script&gt;" in html


def test_a_token_is_redacted_even_when_markdown_escapes_split_it() -> None:
    escaped = PLANTED_TOKEN.replace("_", "\\_")
    assert PLANTED_TOKEN not in markdown(f"token {escaped}", REDACT)
    assert PLANTED_TOKEN not in markdown(f"token `{PLANTED_TOKEN}`", REDACT)


def test_json_and_diffs_are_redacted_and_escaped() -> None:
    assert PLANTED_TOKEN not in pretty_json({"k": PLANTED_TOKEN}, REDACT)
    html = diff_html(f"+<script>{PLANTED_TOKEN}</script>\n-old\n@@ -1 +1 @@", REDACT)
    assert "<script>" not in html and PLANTED_TOKEN not in html
    assert '<span class="d-add">+&lt;script&gt;' in html
    assert '<span class="d-del">-old</span>' in html
    assert '<span class="d-hunk">' in html
