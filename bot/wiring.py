"""Builds the worker's injected pieces from settings: the one place that chooses them."""

from __future__ import annotations

from bot.settings import Settings
from bot.store import Store
from bot.worker import WorkerHooks, default_config, unknown_permission


def build_worker_hooks(settings: Settings, store: Store) -> WorkerHooks:
    """Repository config, permission lookup and run executor for the worker pool.

    Without GitHub access: default repository config, unknown permissions (so commands fail
    closed) and no executor (runs are recorded as queued).
    """
    return WorkerHooks(
        config_loader=default_config,
        permission_lookup=unknown_permission,
        executor=None,
        app_slug=settings.app_slug,
    )
