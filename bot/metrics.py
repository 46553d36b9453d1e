"""Prometheus metrics: what `GET /metrics` serves, and the helpers that record it.

Every label is a small fixed vocabulary: an event name, an outcome, a workflow, a run status,
an HTTP method or status. Nothing names a repository, an installation, a user, a delivery or a
run, so the page reveals traffic volumes and nothing about whose traffic it is. The event of a
delivery whose signature was not checked is recorded as `unverified`: the header is anyone's
to choose, and a label per made-up name would grow without bound. For the same reason an event
label is always one of GitHub's names (`policies.github_events`) or `unverified`: the
signature covers the body and not the header, so even a signed delivery's name is checked.

One process (`bot serve --receivers 1`, tests): values live in this process's memory. Several
(`bot serve --receivers N`): the supervisor calls `use_folder` before it starts anything, so
every process writes its values to files in that folder (prometheus-client's multiprocess
mode) and a scrape of any receiver adds up all of them. prometheus-client picks its mode
when it is first imported, so it is imported here lazily, on first use, never at import time.

Queue depth and age are not recorded but read from the store at scrape time (`QueueReader`),
so they are right whichever process scrapes and after a restart. So are the review findings
(`FindingsReader`): `bot_review_findings_total{outcome=...}` counts the findings posted and
each fate met (`policies.finding_fates.COUNTED`), over every repository, with no repository
label; like the queue's figures it is the same on every process's page (one store), so a
query takes one process's value rather than the sum.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from bot.store.queue.base import QueueStats
from policies.github_events import GITHUB_EVENTS

if TYPE_CHECKING:
    from prometheus_client import Counter, Histogram
    from prometheus_client.registry import Collector

FOLDER_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
UNVERIFIED = "unverified"

QueueReader = Callable[[], QueueStats]
"""Reads the queue's figures from the store; called on a worker thread at scrape time."""
FindingsReader = Callable[[], Mapping[str, int]]
"""Reads the findings posted and each fate's count from the store, at scrape time."""

_INTAKE_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
_RUN_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0)


def use_folder(folder: Path) -> None:
    """Record into files under `folder`, emptied first (values of an earlier start are stale),
    and tell child processes through the environment. Call before anything is recorded."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, mode=0o700)
    os.environ[FOLDER_ENV] = str(folder)


def use_memory() -> None:
    """Record in this process's memory, whatever the environment says (one process)."""
    os.environ.pop(FOLDER_ENV, None)


class _Metrics:
    def __init__(self) -> None:
        from prometheus_client import Counter, Histogram

        self.folder = os.environ.get(FOLDER_ENV) or None
        # Registered with no registry: each scrape builds its own (see `render`).
        registry = None
        self.deliveries: Counter = Counter(
            "bot_deliveries",
            "Webhook deliveries answered, by event and outcome",
            ["event", "outcome"],
            registry=registry,
        )
        self.delivery_children: dict[tuple[str, str], Counter] = {}
        self.intake_seconds: Histogram = Histogram(
            "bot_intake_seconds",
            "Time from a delivery's headers to its answer, for stored deliveries",
            buckets=_INTAKE_BUCKETS,
            registry=registry,
        )
        self.runs_started: Counter = Counter(
            "bot_runs_started",
            "Runs handed to the executor, by workflow (a retried job's run counts again)",
            ["workflow"],
            registry=registry,
        )
        self.runs: Counter = Counter(
            "bot_runs",
            "Runs finished, by workflow and outcome status",
            ["workflow", "status"],
            registry=registry,
        )
        self.run_seconds: Histogram = Histogram(
            "bot_run_duration_seconds",
            "Wall time of finished runs, by workflow",
            ["workflow"],
            buckets=_RUN_BUCKETS,
            registry=registry,
        )
        self.agent_calls: Counter = Counter(
            "bot_agent_calls", "Agent calls, by status (ok, failed)", ["status"], registry=registry
        )
        self.agent_tokens: Counter = Counter(
            "bot_agent_tokens",
            "Model tokens used by agent calls, by kind (input, cache_read, cache_write, output)",
            ["kind"],
            registry=registry,
        )
        self.github_requests: Counter = Counter(
            "bot_github_requests",
            "Requests to the GitHub API, by method and HTTP status (`error`: no answer)",
            ["method", "status"],
            registry=registry,
        )
        self.rate_limit_waits: Counter = Counter(
            "bot_github_rate_limit_waits",
            "Times a GitHub rate limit made the bot wait before sending",
            registry=registry,
        )
        self.rate_limit_seconds: Counter = Counter(
            "bot_github_rate_limit_wait_seconds",
            "Seconds spent waiting for GitHub rate limits",
            registry=registry,
        )
        self.dead_jobs: Counter = Counter(
            "bot_jobs_dead", "Jobs given up on after their last attempt", registry=registry
        )
        self.refused: Counter = Counter(
            "bot_deliveries_refused",
            "Delivery attempts the webhook route refused, by HTTP status and reason",
            ["status", "reason"],
            registry=registry,
        )
        self.refused_children: dict[tuple[int, str], Counter] = {}
        self.refusals_unrecorded: Counter = Counter(
            "bot_refusals_unrecorded",
            "Refused attempts counted but not kept in the refusals table (a flood's oldest)",
            registry=registry,
        )
        self.recorded: tuple[Collector, ...] = (
            self.deliveries,
            self.intake_seconds,
            self.runs_started,
            self.runs,
            self.run_seconds,
            self.agent_calls,
            self.agent_tokens,
            self.github_requests,
            self.rate_limit_waits,
            self.rate_limit_seconds,
            self.dead_jobs,
            self.refused,
            self.refusals_unrecorded,
        )


_lock = threading.Lock()
_metrics: _Metrics | None = None


def _get() -> _Metrics:
    global _metrics
    if _metrics is None:
        with _lock:
            if _metrics is None:
                _metrics = _Metrics()
    return _metrics


# -- recording: called where these events are logged -------------------------------------


def delivery(event: str, outcome: str, seconds: float | None = None) -> None:
    """One answered delivery; `seconds` from its headers to its answer when it was stored.
    An `event` that is not one of GitHub's is counted as `unverified`."""
    if event not in GITHUB_EVENTS:
        event = UNVERIFIED
    m = _get()
    # On the webhook route: the labelled child is looked up once (a third of the cost).
    child = m.delivery_children.get((event, outcome))
    if child is None:
        child = m.delivery_children[(event, outcome)] = m.deliveries.labels(event, outcome)
    child.inc()
    if seconds is not None:
        m.intake_seconds.observe(seconds)


def refused(status: int, reason: str) -> None:
    """One refused delivery attempt; `reason` is one of the route's own words."""
    m = _get()
    # Looked up once per label pair: a flood of refusals counts each on the event loop.
    child = m.refused_children.get((status, reason))
    if child is None:
        child = m.refused_children[(status, reason)] = m.refused.labels(str(status), reason)
    child.inc()


def refusal_unrecorded() -> None:
    _get().refusals_unrecorded.inc()


def run_started(workflow: str) -> None:
    _get().runs_started.labels(workflow).inc()


def run_finished(workflow: str, status: str, seconds: float | None) -> None:
    m = _get()
    m.runs.labels(workflow, status).inc()
    if seconds is not None:
        m.run_seconds.labels(workflow).observe(seconds)


def agent_call(ok: bool, tokens: Mapping[str, int]) -> None:
    """One finished agent call and its tokens by kind (input, cache_read, cache_write, output)."""
    m = _get()
    m.agent_calls.labels("ok" if ok else "failed").inc()
    for kind, count in tokens.items():
        if count > 0:
            m.agent_tokens.labels(kind).inc(count)


def github_request(method: str, status: int | None) -> None:
    """One answer from GitHub (`status` None: the request got no answer)."""
    _get().github_requests.labels(method.upper(), "error" if status is None else str(status)).inc()


def rate_limit_wait(seconds: float) -> None:
    m = _get()
    m.rate_limit_waits.inc()
    m.rate_limit_seconds.inc(max(0.0, seconds))


def job_dead() -> None:
    _get().dead_jobs.inc()


# -- the scrape ---------------------------------------------------------------------------


def _queue_collector(read: QueueReader) -> Collector:
    """Gauges read from the store when scraped."""
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.registry import Collector

    class QueueCollector(Collector):
        def collect(self) -> Iterator[GaugeMetricFamily]:
            stats = read()
            jobs = GaugeMetricFamily("bot_jobs", "Jobs in the queue, by status", labels=["status"])
            jobs.add_metric(["queued"], stats.queued)
            jobs.add_metric(["running"], stats.running)
            jobs.add_metric(["dead"], stats.dead)
            yield jobs
            yield GaugeMetricFamily(
                "bot_queue_depth", "Queued jobs ready to be claimed now", value=stats.ready
            )
            yield GaugeMetricFamily(
                "bot_queue_oldest_seconds",
                "How long the oldest ready job has waited to be claimed (0 when none waits)",
                value=stats.oldest_ready_age,
            )

    return QueueCollector()


def _findings_collector(read: FindingsReader) -> Collector:
    """The findings' counter, read from the store when scraped."""
    from prometheus_client.core import CounterMetricFamily
    from prometheus_client.registry import Collector

    class FindingsCollector(Collector):
        def collect(self) -> Iterator[CounterMetricFamily]:
            family = CounterMetricFamily(
                "bot_review_findings",
                "Review findings posted, and how many were fixed, dismissed, outdated or"
                " open when their pull request closed",
                labels=["outcome"],
            )
            for outcome, count in read().items():
                family.add_metric([outcome], count)
            yield family

    return FindingsCollector()


def render(read_queue: QueueReader | None, read_findings: FindingsReader | None = None) -> bytes:
    """The metrics page in Prometheus' text format. Blocking: run it on a worker thread."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    m = _get()
    registry = CollectorRegistry()
    if m.folder is not None:
        MultiProcessCollector(registry, path=m.folder)  # type: ignore[no-untyped-call]
    else:
        for collector in m.recorded:
            registry.register(collector)
    if read_queue is not None:
        registry.register(_queue_collector(read_queue))
    if read_findings is not None:
        registry.register(_findings_collector(read_findings))
    return generate_latest(registry)
