"""policies.lint_output: a lint command's output parsed, kept to changed lines, quoted paths."""

from __future__ import annotations

import json
import shlex

import pytest

from policies import lint_output
from policies.lint_output import LintHit, candidates, files_argument, parse_lint, relative_path


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        pytest.param("calc/ops.py", "calc/ops.py", id="relative"),
        pytest.param("./calc/ops.py", "calc/ops.py", id="dot-slash"),
        pytest.param("/workspace/calc/ops.py", "calc/ops.py", id="checkout-root"),
        pytest.param("file:///workspace/calc/ops.py", "calc/ops.py", id="file-uri"),
        pytest.param("/etc/passwd", None, id="absolute-elsewhere"),
        pytest.param("../outside.py", None, id="parent"),
        pytest.param("calc//ops.py", None, id="empty-part"),
        pytest.param("", None, id="empty"),
    ],
)
def test_relative_path(raw: str, path: str | None) -> None:
    assert relative_path(raw) == path


def test_concise_lines_and_their_variants_parse() -> None:
    output = "\n".join(
        [
            "calc/ops.py:18:5: F821 Undefined name `x`",
            "/workspace/calc/cli.py:3: error: Incompatible types  [assignment]",
            "./calc/ops.py:22:1 - warning something",
            "Found 2 errors.",
            "../etc/passwd:1: no",
            "calc/ops.py:0: zero line",
            "not a hit at all",
        ]
    )
    assert parse_lint(output) == [
        LintHit("calc/ops.py", 18, 5, "F821 Undefined name `x`", "F821"),
        LintHit("calc/cli.py", 3, None, "error: Incompatible types  [assignment]", "error"),
        LintHit("calc/ops.py", 22, 1, "warning something", "warning"),
    ]


def sarif(*results: object) -> str:
    return json.dumps({"version": "2.1.0", "runs": [{"results": list(results)}, "junk"]})


def result(
    uri: object = "calc/ops.py", line: object = 18, text: object = "bad", **kw: object
) -> dict[str, object]:
    return {
        "ruleId": kw.get("rule", "E1"),
        "message": {"text": text},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": uri},
                    "region": {"startLine": line, "startColumn": kw.get("col", 2)},
                }
            }
        ],
    }


def test_sarif_results_parse_and_bad_ones_are_skipped() -> None:
    output = sarif(
        result(),
        result("file:///workspace/calc/cli.py", 4, "other", rule=None, col=True),
        result("/etc/shadow"),
        result(line=0),
        result(line=True),
        result(text=None),
        {"message": {"text": "no location"}, "locations": []},
        "not a result",
    )
    assert parse_lint(output) == [
        LintHit("calc/ops.py", 18, 2, "bad", "E1"),
        LintHit("calc/cli.py", 4, None, "other", ""),
    ]


def test_json_that_is_not_sarif_is_read_as_lines() -> None:
    assert parse_lint('{"runs": 1}') == parse_lint('{"a": 1}') == []
    assert parse_lint("{not json\ncalc/ops.py:1: x") == [LintHit("calc/ops.py", 1, None, "x", "")]


def test_a_flood_of_hits_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lint_output, "MAX_HITS", 3)
    assert len(parse_lint("\n".join(f"a.py:{n}: x" for n in range(1, 10)))) == 3
    assert len(parse_lint(sarif(*[result(line=n) for n in range(1, 10)]))) == 3


def test_candidates_are_hits_on_added_lines_only() -> None:
    hits = [
        LintHit("calc/ops.py", 18, 5, "F821 Undefined   name", "F821"),
        LintHit("calc/ops.py", 18, 5, "F821 Undefined name", "F821"),  # the same, once
        LintHit("calc/ops.py", 5, None, "on an unchanged line", ""),
        LintHit("README.md", 1, None, "not a changed file", ""),
        LintHit("calc/ops.py", 19, None, "   ", ""),
    ]
    got = candidates(hits, {"calc/ops.py": frozenset({18, 19})}, tool="ruff")
    assert got == [
        {
            "path": "calc/ops.py",
            "start_line": 18,
            "end_line": 18,
            "severity": "low",
            "category": "style",
            "title": "ruff: F821 Undefined name",
            "explanation": "`ruff` reports at `calc/ops.py:18:5`: F821 Undefined name",
        }
    ]


def test_candidates_are_capped_per_file_and_in_all() -> None:
    hits = [LintHit(p, n, None, f"m{n}") for p in ("a.py", "b.py") for n in range(1, 20)]
    changed = {"a.py": frozenset(range(1, 20)), "b.py": frozenset(range(1, 20))}
    assert len(candidates(hits, changed, tool="", per_file=3)) == 6
    few = candidates(hits, changed, tool="", per_file=10, limit=4)
    assert len(few) == 4 and few[0]["title"] == "lint: m1"


def test_files_argument_quotes_every_path() -> None:
    paths = ["calc/ops.py", "a b.py", "$(touch pwned).py", "-rf.py", "x';rm -rf ~;'.py"]
    argument = files_argument(paths)
    assert shlex.split(argument) == [
        "calc/ops.py",
        "a b.py",
        "$(touch pwned).py",
        "./-rf.py",
        "x';rm -rf ~;'.py",
    ]
