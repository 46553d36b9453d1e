"""The progress view and usage the executor builds from the engine's live run details."""

from __future__ import annotations

from bot.engine.details import AgentDetails, RunDetails
from bot.runs.progress import Tracker, progress_of, usage_of


def _details() -> RunDetails:
    details = RunDetails(
        run_id="wf_0123456789ab",
        name="triage",
        phases=[{"title": "Explore"}, {"title": "Conclude"}],
        current_phase="Conclude",
        usage={"input": 120, "output": 30, "total": 150, "cost": 0.25},
    )
    details.agents = [
        AgentDetails(
            index=0, label="explore", phase="Explore", agent_type="explorer", state="done"
        ),
        AgentDetails(
            index=1, label="ping @octocat", phase="Conclude", agent_type="advisor", state="error"
        ),
    ]
    details.logs = [f"line {n}" for n in range(12)] + ["explorer failed: said @org/team \x1b[31mhi"]
    return details


def test_progress_shows_states_the_newest_logs_and_defuses_mentions() -> None:
    progress = progress_of(_details(), "triage", 2.5)
    assert progress.phases == ("Explore", "Conclude")
    assert progress.current_phase == "Conclude"
    assert [(a.label, a.state) for a in progress.agents] == [
        ("explore", "ok"),
        ("ping @\u200boctocat", "failed"),
    ]
    assert len(progress.logs) == 10
    assert progress.logs[-1] == "explorer failed: said @\u200borg/team hi"
    assert progress.tokens == 150 and progress.elapsed == 2.5


def test_usage_counts_agents_and_keeps_the_cost() -> None:
    usage = usage_of(_details(), 4.0)
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (120, 30, 150)
    assert usage.cost == 0.25 and usage.wall_seconds == 4.0
    assert (usage.agents_ok, usage.agents_failed) == (1, 1)
    assert usage_of(None, 1.5).wall_seconds == 1.5


def test_tracker_counts_versions_and_measures_from_its_start() -> None:
    now = [100.0]
    tracker = Tracker("triage", 90.0, clock=lambda: now[0])
    assert tracker.progress() is None
    tracker.update(_details())
    tracker.update(_details())
    progress = tracker.progress()
    assert tracker.version == 2 and progress is not None and progress.elapsed == 10.0
