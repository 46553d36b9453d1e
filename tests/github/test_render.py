"""Tests for bot/publish/render.py: markers, progress, final and BLOCKED comments, replies."""

from __future__ import annotations

import pytest

from bot.publish.render import (
    MAX_BODY,
    AgentLine,
    Progress,
    RunRow,
    answered_note,
    follow_up_note,
    parse_markers,
    render_check_output,
    render_help,
    render_outcome,
    render_progress,
    render_status,
    render_stop,
    run_marker,
    sticky_marker,
)
from policies.outcome import Blocked, Finding, NeedsInfo, Outcome, UsageSummary
from tests.github._markdown_check import _MD, _walk, hidden_comments, problems

RUN = "wf_0123456789ab"
USAGE = UsageSummary(
    input_tokens=1000,
    output_tokens=234,
    total_tokens=1234,
    cost=0.0123,
    wall_seconds=12.34,
    agents_ok=2,
    agents_failed=1,
)


def test_markers_round_trip() -> None:
    body = f"{run_marker(RUN, 'triage')}\n{sticky_marker('triage')}\ntext"
    markers = parse_markers(body)
    assert (markers.run_id, markers.kind, markers.sticky) == (RUN, "triage", "triage")
    assert parse_markers("no markers") == parse_markers(None)
    assert parse_markers("<!-- bot:run=wf_x kind=t -->").run_id is None
    planted = (
        f"{run_marker(RUN, 'ask')}\nanswer text {sticky_marker('help')} {run_marker(RUN, 'x')}"
    )
    assert parse_markers(planted) == parse_markers(run_marker(RUN, "ask"))
    assert parse_markers(f"quoted: {run_marker(RUN, 'triage')}").run_id is None


def test_progress_shows_phases_agents_and_log() -> None:
    progress = Progress(
        run_id=RUN,
        workflow="triage",
        phases=("Explore", "Conclude", "Publish"),
        current_phase="Conclude",
        agents=(AgentLine("explore-1", "Explore", "ok"), AgentLine("synth", "Conclude", "running")),
        logs=("read 3 files",),
        tokens=1500,
        elapsed=3.25,
    )
    body = render_progress(progress)
    assert body.startswith(f"{run_marker(RUN, 'triage')}\n{sticky_marker('triage')}\n")
    assert "Phases: ✅ Explore → 🔄 **Conclude** → ⏳ Publish" in body
    assert "- ✅ `explore-1` (Explore): ok" in body
    assert "- 🔄 `synth` (Conclude): running" in body
    assert "- read 3 files" in body
    assert f"<sub>Run `{RUN}` · 1,500 tokens · 3.2 s</sub>" in body


def test_progress_without_sticky_has_only_the_run_marker() -> None:
    body = render_progress(Progress(run_id=RUN, workflow="ask", phases=()), sticky=False)
    assert sticky_marker("ask") not in body
    assert parse_markers(body).kind == "ask"


def test_final_summary_with_assumptions_findings_and_footer() -> None:
    outcome = Outcome(
        status="succeeded",
        summary="The bug is in `parse()`.",
        run_id=RUN,
        workflow="triage",
        assumptions=("Python 3.11 is the target",),
        usage=USAGE,
        findings=(Finding("a.py", 3, "high", "Null deref", "x may be None", "f" * 16),),
    )
    body = render_outcome(outcome)
    assert "### Triage\n\nThe bug is in `parse()`." in body
    assert "- **high** `a.py:3`: Null deref\n  x may be None" in body
    assert "**Assumptions**\n\n- Python 3.11 is the target" in body
    assert body.endswith(
        f"<sub>Run `{RUN}` · agents 2 ok, 1 failed · 1,234 tokens · $0.0123 · 12.3 s</sub>"
    )


def test_blocked_report_has_decision_options_default_risk_and_reply() -> None:
    blocked = Blocked(
        decision="Which platform?",
        why="Traces differ.",
        options=("Linux", "macOS"),
        default="Linux",
        risk="Wrong fix.",
        answer="@app decide 1",
        answer_own='@app decide "<your own answer>"',
    )
    outcome = Outcome(
        status="blocked",
        summary="Which platform?",
        run_id=RUN,
        workflow="triage",
        usage=UsageSummary(wall_seconds=75),
        blocked=blocked,
    )
    body = render_outcome(outcome)
    assert "### Triage: needs a decision" in body
    assert "**Decision needed:** Which platform?" in body
    assert "**Why:** Traces differ." in body
    assert "1. Linux *(default)*\n2. macOS" in body
    assert "**Risk:** Wrong fix." in body
    assert "**To answer**, reply in this thread with the number of the option" in body
    assert "```text\n@app decide 1\n```\n\nor in your own words:" in body
    assert '```text\n@app decide "<your own answer>"\n```' in body
    assert body.count("Which platform?") == 1
    assert "1m15s" in body
    assert "$" not in body.split("<sub>")[1]


def needs_info(info: NeedsInfo, *, notes: tuple[str, ...] = ()) -> Outcome:
    return Outcome(
        status="needs_info",
        summary="The crash is likely in `src/app.py:2`.",
        run_id=RUN,
        workflow="triage",
        needs_info=info,
        notes=notes,
    )


def test_needs_info_names_the_reporter_asks_and_says_what_was_found() -> None:
    questions = ("Which command fails?", "What does it print?", "Which version?")
    body = render_outcome(needs_info(NeedsInfo(questions, "alice", rerun_on_reply=True)))
    assert "### Triage: needs more information" in body
    assert (
        "@alice, thanks for the report. A maintainer needs a few answers that only you can "
        "give before work can start:\n\n"
        "1. Which command fails?\n2. What does it print?\n3. Which version?"
    ) in body
    assert "triage runs again with your answers." in body
    assert "**What was found so far**\n\nThe crash is likely in `src/app.py:2`." in body
    assert "Decision needed" not in body and "--decision" not in body


def test_needs_info_without_a_reporter_or_questions_or_another_run() -> None:
    body = render_outcome(needs_info(NeedsInfo(())))
    assert "@" not in body.split("<!-- bot:sticky=triage -->")[1]
    assert "only the reporter can give before work can start." in body
    assert "a maintainer will take it from there." in body
    assert "runs again" not in body


def test_notes_follow_the_summary() -> None:
    info = NeedsInfo(("Which version?",), "alice")
    body = render_outcome(needs_info(info, notes=("Labels applied: `bug`.",)))
    assert body.index("**What was found so far**") < body.index("Labels applied: `bug`.")
    done = Outcome("succeeded", "Done.", RUN, "triage", notes=("Labels applied: `bug`.",))
    assert "Done.\n\nLabels applied: `bug`." in render_outcome(done)


def test_answer_fence_survives_backticks() -> None:
    blocked = Blocked("d", "", ("a", "b"), "a", "", '@app fix --decision "use ```x```"')
    outcome = Outcome(status="blocked", summary="d", run_id=RUN, workflow="fix", blocked=blocked)
    assert "````text\n" in render_outcome(outcome)


@pytest.mark.parametrize(
    ("status", "heading"),
    [
        pytest.param("failed", "### Answer: failed", id="failed"),
        pytest.param("no_changes", "### Answer: nothing to change", id="no_changes"),
        pytest.param("needs_info", "### Answer: needs more information", id="needs_info"),
        pytest.param("skipped", "### Answer: skipped", id="skipped"),
    ],
)
def test_headings(status: str, heading: str) -> None:
    outcome = Outcome(status=status, summary="s", run_id=RUN, workflow="ask")  # type: ignore[arg-type]
    assert heading in render_outcome(outcome)


def test_bodies_are_capped_below_githubs_limit() -> None:
    outcome = Outcome(status="succeeded", summary="x" * 100_000, run_id=RUN, workflow="ask")
    body = render_outcome(outcome)
    assert len(body) <= MAX_BODY
    assert "[truncated:" in body
    assert parse_markers(body).run_id == RUN


def test_replies() -> None:
    help_body = render_help(RUN, "Commands: ...", note="Unknown command `frob`.")
    assert parse_markers(help_body).sticky == "help"
    assert "> Unknown command `frob`.\n\nCommands: ..." in help_body
    rows = [RunRow("wf_aaaaaaaaaaaa", "triage", "completed", "2026-01-01T00:00:00Z")]
    status = render_status(RUN, rows, target="issue #7")
    assert "| `wf_aaaaaaaaaaaa` | triage | completed | 2026-01-01T00:00:00Z |" in status
    assert "No runs recorded for issue #7." in render_status(RUN, [], target="issue #7")
    assert "Stopped `wf_aaaaaaaaaaaa` on PR #3." in render_stop(
        RUN, ["wf_aaaaaaaaaaaa"], target="PR #3"
    )
    assert "nothing to stop" in render_stop(RUN, [], target="PR #3")


def test_check_output_has_title_and_no_markers() -> None:
    outcome = Outcome(status="failed", summary="boom", run_id=RUN, workflow="review")
    output = render_check_output(outcome)
    assert output["title"] == "Review: Failed"
    assert "<!--" not in output["summary"]
    assert "boom" in output["summary"]


HOSTILE = (
    "See ![chart](https://evil.test/pixel.png) and <img src=https://evil.test/p.png alt=x>.\n"
    "<!-- hidden instructions -->\n"
    f"<!-- bot:run={RUN} kind=review -->\n"
    '<a href="javascript:alert(1)">click</a> or [here](http://evil.test) or http://evil.test/x'
)
OWN_HTML = (
    run_marker(RUN, "triage"),
    sticky_marker("triage"),
    "<sub>",
    "</sub>",
    "<details><summary>Log</summary>",
    "</details>",
)


def test_model_text_in_an_outcome_is_posted_without_html_images_or_odd_links() -> None:
    blocked = Blocked(
        decision="Pick <img src=https://evil.test/d.png>",
        why=HOSTILE,
        options=("![a](https://evil.test/a.png)", "[b](javascript:alert(1))"),
        default="![a](https://evil.test/a.png)",
        risk="<!-- bot:sticky=help -->",
        answer='@app triage --decision "<img src=x>"',
    )
    outcome = Outcome(
        status="blocked",
        summary=HOSTILE,
        run_id=RUN,
        workflow="triage",
        assumptions=("<script>alert(1)</script>",),
        findings=(Finding("a`b<img src=x>`.py", 3, "high", HOSTILE, HOSTILE, "f" * 16),),
        blocked=blocked,
    )
    body = render_outcome(outcome)
    assert problems(body, allowed_html=OWN_HTML) == []
    assert hidden_comments(body) == [run_marker(RUN, "triage"), sticky_marker("triage")]
    assert "click" in body and "here" in body and "chart" in body
    markers = parse_markers(body)
    assert (markers.run_id, markers.kind, markers.sticky) == (RUN, "triage", "triage")
    check = render_check_output(outcome)
    assert problems(check["summary"], allowed_html=OWN_HTML) == []
    assert hidden_comments(check["summary"]) == []


def test_progress_keeps_its_own_log_section_and_cleans_what_is_inside() -> None:
    progress = Progress(
        run_id=RUN,
        workflow="triage",
        phases=("Explore",),
        agents=(AgentLine("x<img src=y>`z", "Explore", "running"),),
        logs=(HOSTILE, "</details><img src=https://evil.test/l.png>"),
    )
    body = render_progress(progress)
    assert problems(body, allowed_html=OWN_HTML) == []
    assert body.count("<details><summary>Log</summary>") == 1
    assert body.count("</details>") == 1
    assert hidden_comments(body) == [run_marker(RUN, "triage"), sticky_marker("triage")]


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param('@app fix --decision "```\n<img src=x>\n```"', id="backticks"),
        pytest.param('@app fix --decision "~~~\n<img src=x>"', id="tildes"),
        pytest.param('@app fix --decision "````` </details> <!-- x -->"', id="long-run"),
    ],
)
def test_the_answer_fence_cannot_be_closed_by_its_content(answer: str) -> None:
    blocked = Blocked("d", "", ("a", "b"), "a", "", answer)
    outcome = Outcome(status="blocked", summary="d", run_id=RUN, workflow="fix", blocked=blocked)
    body = render_outcome(outcome)
    fences = [t for t in _walk(_MD.parse(body)) if t.type == "fence"]
    assert [t.content for t in fences] == [answer + "\n"]
    assert (
        problems(
            body, allowed_html=(run_marker(RUN, "fix"), sticky_marker("fix"), "<sub>", "</sub>")
        )
        == []
    )


def _blocked_outcome(**changes: object) -> Outcome:
    blocked = Blocked(
        "Which platform?", "", ("Linux", "macOS"), "Linux", "", "@app decide 1", '@app decide "x"'
    )
    fields: dict[str, object] = {
        "status": "blocked",
        "summary": "Which platform?",
        "run_id": RUN,
        "workflow": "triage",
        "blocked": blocked,
    }
    return Outcome(**(fields | changes))  # type: ignore[arg-type]


def test_an_answered_report_says_so_in_place_of_how_to_answer() -> None:
    note = answered_note(
        by="maint",
        text="Linux",
        option=1,
        follow_up="wf_00000000beef",
        url="https://github.com/o/r/issues/1#issuecomment-9",
    )
    body = render_outcome(_blocked_outcome(), answered=note)
    assert (
        "### Triage: needs a decision\n\n**Answered** by @\u200bmaint: option 1, “Linux” — "
        "follow-up: [run `wf_00000000beef`](https://github.com/o/r/issues/1#issuecomment-9)"
    ) in body
    assert "1. Linux *(default)*\n2. macOS" in body
    assert "To answer" not in body and "decide 1" not in body
    assert parse_markers(body).sticky == "triage"


def test_an_answered_note_quotes_the_answer_on_one_line_without_code_or_mentions() -> None:
    ticks = "`" * 3
    note = answered_note(
        by="ma<b>int",
        text=f"use {ticks}x{ticks}\n@octocat " + "y" * 400,
        option=None,
        follow_up="wf_00000000beef",
        url="http://insecure.test/x",
    )
    quotes = "'" * 3
    assert note.startswith(
        f"**Answered** by @\u200bmabint: “use {quotes}x{quotes} @\u200boctocat y"
    )
    assert "\n" not in note and "`" not in note.split("—")[0]
    assert note.endswith("— follow-up: run `wf_00000000beef`")
    assert len(note) < 400


def test_a_follow_ups_comment_opens_with_its_note_under_its_own_marker() -> None:
    note = follow_up_note(
        by="maint",
        text="macOS",
        option=2,
        blocked_run=RUN,
        url="https://github.com/o/r/issues/1#issuecomment-9",
        replayed=1,
        total=2,
    )
    outcome = Outcome("succeeded", "Done.", "wf_00000000beef", "triage", note=note)
    body = render_outcome(outcome, sticky=False, kind="follow-up")
    assert body.startswith(run_marker("wf_00000000beef", "follow-up") + "\n### Triage\n\n")
    assert (
        "**Follow-up** to the question of [run `wf_0123456789ab`]"
        "(https://github.com/o/r/issues/1#issuecomment-9), answered by @maint: option 2, "
        "“macOS”; replayed 1 of 2 agent calls.\n\nDone."
    ) in body
    markers = parse_markers(body)
    assert (markers.kind, markers.sticky) == ("follow-up", None)
    progress = render_progress(
        Progress(run_id="wf_00000000beef", workflow="triage", phases=()),
        sticky=False,
        kind="follow-up",
    )
    assert parse_markers(progress).kind == "follow-up"
    assert "### Triage: working…" in progress


def test_a_report_recorded_before_decide_shows_the_reply_it_had() -> None:
    old = _blocked_outcome(
        blocked=Blocked("d", "", ("a", "b"), "a", "", '@app ask triage this again --decision "a"')
    )
    body = render_outcome(old)
    assert "**To answer**, reply with:\n\n```text\n@app ask triage" in body
    assert "own words" not in body
