"""Builds the worker's injected pieces from settings: the one place that chooses them.

With GitHub App credentials (BOT_APP_ID and a private key) the worker gets:

- `config_loader`: `.github/bot.yml` from the repository's default branch (never a PR head),
  with `_extends` followed (same owner by default, at most `MAX_EXTENDS` files, loops refused),
  merged over the defaults, its `agents` checked against what the settings allow
  (`bot.agents.repo_types`); an invalid file raises `ConfigError` with line references;
- `permission_lookup`: the sender's collaborator permission (cached briefly by the client; any
  failure gives None, so commands fail closed);
- `pull_lookup` and `app_id`: the open pull request at a check's head, for a check run again
  whose payload lists none (a fork's), and the App's id, which says whose check it is;
- `executor`: `bot.runs.execute.RunExecutor` on the real runner, engine, mirrors and client;
- `access` and `stop_run`: the client's installation tokens and the engine's runs, which an
  installation's lifecycle change drops and stops (`bot.runs.lifecycle`);
- `background`: the mirror sweep, and unless BOT_REDELIVER_INTERVAL is 0 the periodic redelivery
  of missed deliveries (`bot.ops.redeliver`);
- `pull_closed`: the fates of a closed pull request's findings (`bot.workflows.review.fates`).

Without credentials: default config, unknown permissions (commands fail closed) and no executor.
In both cases `setup` says what is configured (the App's credentials, a model), so a delivery
that would start a run the deployment cannot carry out is skipped `not_configured` before any
run is recorded, and nothing is posted (`policies.readiness`). In both cases the log redactor is
installed with the deployment's secret values.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio

from bot.log import get_logger
from bot.redact import install as install_redactor
from bot.runs.worker import DEFAULT_APP_SLUG, WorkerHooks, default_config, unknown_permission
from bot.settings import Settings
from bot.store.contract import Storage
from policies.budget import BudgetLimits
from policies.config import (
    CONFIG_PATH,
    ConfigError,
    ConfigProblem,
    RepoConfig,
    load_config_data,
    merge_repo_config,
    parse_extends,
    parse_repo_config,
)
from policies.config import extends_target as read_extends
from policies.event import Event
from policies.finding_fates import PullClosed, ThreadDeclined
from policies.readiness import Setup

if TYPE_CHECKING:
    from bot.agents.sandbox import SandboxStatus
    from bot.github.client import GitHubApp
    from bot.github.installation import InstallationClient

log = get_logger(__name__)

MAX_EXTENDS = 5
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _extends_error(message: str) -> ConfigError:
    return ConfigError([ConfigProblem(message, "_extends")])


def has_credentials(settings: Settings) -> bool:
    return settings.app_id is not None and (
        settings.private_key is not None or settings.private_key_path is not None
    )


def has_model(settings: Settings) -> bool:
    """Whether agents have a model: BOT_MODEL and an endpoint for the default provider (as
    `bot.agents.runtime.build_runner` needs them; `bot doctor` checks the same)."""
    provider = settings.llm_provider.lower()
    endpoint = provider == "anthropic" or bool(settings.llm_base_url)
    return bool(settings.model) and endpoint


def _setup(settings: Settings, *, credentials: bool) -> Setup:
    from bot.workflows import MODEL_FREE

    return Setup(credentials=credentials, model=has_model(settings), model_free=MODEL_FREE)


def _loopback(url: str) -> bool:
    return (urlsplit(url).hostname or "") in _LOOPBACK


def _learn_slug(settings: Settings) -> str:
    """BOT_APP_SLUG, else the App's slug from `GET /app`, else the default (with a warning)."""
    if settings.app_slug:
        return settings.app_slug
    from bot.github.client import GitHubApp

    async def ask() -> str:
        async with GitHubApp.from_settings(settings) as app:
            return await app.slug()

    try:
        return anyio.run(ask)
    except Exception as exc:  # start anyway; commands then answer to the default name
        log.warning(
            "could not learn the App's name from GET /app; set BOT_APP_SLUG",
            extra={"error": str(exc), "slug": DEFAULT_APP_SLUG},
        )
        return DEFAULT_APP_SLUG


async def close_when_stopped(github: GitHubApp) -> None:
    """Hold the GitHub client open for the pool's lifetime; close its connections after."""
    try:
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await github.aclose()


def build_worker_hooks(
    settings: Settings,
    store: Storage,
    *,
    github: GitHubApp | None = None,
    review_key: bytes | None = None,
    sweeps: bool = True,
    sandbox: SandboxStatus | None = None,
    carry_blocked: bool = False,
) -> WorkerHooks:
    """Repository config, permission lookup and run executor for the worker pool.

    `github` is the client to act through (default: the App's, from the settings' credentials;
    `bot action` gives a `TokenApp` on the job's token); `review_key` signs the review memory
    mirrored on the pull request (default: `review_state_key(settings)`); `sweeps` False leaves
    out the background sweeps and redelivery (one run in one process); `sandbox` is the
    sandbox's probed status (default: probed here); `carry_blocked` has a BLOCKED run's comment
    carry its record for a `decide` in another process (`RunExecutor.carry_blocked`)."""
    redactor = install_redactor(settings)
    if github is None and not has_credentials(settings):
        return WorkerHooks(
            config_loader=default_config,
            permission_lookup=unknown_permission,
            executor=None,
            app_slug=settings.app_slug,
            setup=_setup(settings, credentials=False),
            app_id=settings.app_id,
        )

    from bot.agents.repo_types import RunAgentTypes
    from bot.agents.runtime import build_runner
    from bot.engine.artifacts import RunNotFound
    from bot.engine.engine import Engine
    from bot.git.checkout import Mirrors
    from bot.github.client import GitHubApp
    from bot.github.errors import GitHubError, RetryableError
    from bot.ops.redeliver import redeliver_forever
    from bot.runs.execute import RunExecutor
    from bot.runs.leftovers import sweep_forever
    from bot.workflows.flows import FLOWS
    from bot.workflows.review.fates import close_pull, learn_from_reply
    from bot.workflows.review.memory import review_state_key

    if github is None:
        slug = _learn_slug(settings)
        github = GitHubApp.from_settings(settings, app_slug=slug)
    else:  # a given client answers to the name the settings give
        slug = settings.app_slug or DEFAULT_APP_SLUG
    # The app's agent types, and the rules a repository's own (`agents`) are read under.
    agent_types = RunAgentTypes.from_settings(settings)
    engine = Engine(
        build_runner(settings, sandbox=sandbox),
        data_dir=settings.data_dir,
        agent_types=agent_types.app,
        role_models=settings.role_models,
        default_model=settings.model,
        mirror=store,
    )
    recovered = engine.recover_stale()
    if recovered:
        log.info("runs left running by a stopped process marked aborted", extra={"runs": recovered})
    mirrors = Mirrors(
        settings.data_dir,
        web_url=settings.github_web_url,
        # Plain http only for a server on this machine (a local test GitHub).
        allow_http=_loopback(settings.github_web_url),
    )

    async def config_loader(event: Event) -> RepoConfig:
        if event.installation_id is None or not event.repo_full_name:
            return parse_repo_config(None)
        owner, repo = event.repo_full_name.split("/", 1)
        return await read_config(github.installation(event.installation_id, owner, repo))

    async def read_config(client: InstallationClient) -> RepoConfig:
        owner, repo = client.owner, client.repo
        text = await client.get_file_text(CONFIG_PATH)
        data = load_config_data(text)
        base: dict[str, object] = {}
        seen = {f"{owner}/{repo}:{CONFIG_PATH}".lower()}
        value = read_extends(data)
        chain: list[dict[str, object]] = []
        while value is not None:
            target = parse_extends(value)
            t_owner = target.owner or owner
            key = f"{t_owner}/{target.repo}:{target.path}".lower()
            if key in seen:
                raise _extends_error(f"_extends loops back to {key}")
            if len(seen) > MAX_EXTENDS:
                raise _extends_error(f"_extends chains more than {MAX_EXTENDS} files")
            seen.add(key)
            other = github.installation(client.installation_id, t_owner, target.repo)
            try:
                other_text = await other.get_file_text(target.path)
            except GitHubError as exc:
                if isinstance(exc, RetryableError) or exc.status >= 500:
                    raise  # transient: the job is retried
                raise _extends_error(f"_extends target {key} cannot be read ({exc})") from None
            if other_text is None:
                raise _extends_error(f"_extends target {key} does not exist")
            other_data = load_config_data(other_text, file=f"{t_owner}/{target.repo}:{target.path}")
            value = read_extends(other_data)
            chain.append({k: v for k, v in other_data.items() if k != "_extends"})
        for layer in reversed(chain):
            base = merge_repo_config(base, layer)
        return parse_repo_config(text, base=base or None, agent_rules=agent_types.rules)

    executor = RunExecutor(
        github=github,
        engine=engine,
        mirrors=mirrors,
        store=store,
        app_slug=slug,
        redactor=redactor,
        config_reader=read_config,
        review_key=review_key if review_key is not None else review_state_key(settings),
        carry_blocked=carry_blocked,
        flows=FLOWS,
        agent_types=agent_types,
        run_caps=BudgetLimits(
            max_tokens=settings.max_run_tokens,
            max_cost_usd=settings.max_run_cost_usd,
            daily_tokens=settings.daily_tokens,
        ),
    )

    async def permission_lookup(event: Event) -> str | None:
        if event.installation_id is None or not event.repo_full_name or not event.sender_login:
            return None
        owner, repo = event.repo_full_name.split("/", 1)
        client = github.installation(event.installation_id, owner, repo)
        return await client.get_collaborator_permission(event.sender_login)

    async def pull_lookup(event: Event) -> int | None:
        if event.installation_id is None or not event.repo_full_name or not event.head_sha:
            return None
        owner, repo = event.repo_full_name.split("/", 1)
        client = github.installation(event.installation_id, owner, repo)
        pulls = await client.open_pulls_at(event.head_sha)
        return min((pull.number for pull in pulls), default=None)

    async def pull_closed(closed: PullClosed) -> str:
        client = None
        if closed.installation_id is not None:
            owner, repo = closed.repo.split("/", 1)
            client = github.installation(closed.installation_id, owner, repo)
        return await close_pull(store, closed, client=client, bot_login=executor.bot_login)

    async def thread_declined(declined: ThreadDeclined) -> str:
        if declined.installation_id is None:
            return "a reply declining a finding, without an installation"
        owner, repo = declined.repo.split("/", 1)
        client = github.installation(declined.installation_id, owner, repo)
        return await learn_from_reply(store, declined, client=client, bot_login=executor.bot_login)

    async def stop_run(run_id: str, reason: str) -> bool:
        try:
            await engine.stop(run_id, reason)
        except RunNotFound:
            return False  # not running in this process
        return True

    background: list[Callable[[], Coroutine[Any, Any, object]]] = []
    if sweeps:
        background += [mirrors.sweep_forever, partial(sweep_forever, mirrors.root, store)]
    background.append(partial(close_when_stopped, github))
    if sweeps and settings.redeliver_interval:  # 0 turns the sweep off
        background.append(partial(redeliver_forever, github, store, settings.redeliver_interval))

    return WorkerHooks(
        config_loader=config_loader,
        permission_lookup=permission_lookup,
        pull_lookup=pull_lookup,
        executor=executor,
        skip_handler=executor.answer_skip,
        access=github,
        stop_run=stop_run,
        background=tuple(background),
        app_slug=slug,
        setup=_setup(settings, credentials=True),
        app_id=settings.app_id,
        pull_closed=pull_closed,
        thread_declined=thread_declined,
    )
