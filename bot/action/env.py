"""The GitHub Actions environment `bot action` runs in, read once and checked.

GitHub sets these for every job step (see "Default environment variables" in GitHub's
documentation); the composite action (`action.yml`) passes the job's token as
`GITHUB_TOKEN`. A job run outside Actions, or with a variable missing, gets one line naming
it rather than a traceback later.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

__all__ = ["ActionEnv", "ActionEnvError", "read_event"]

MAX_EVENT_BYTES = 25 * 1024 * 1024
"""GitHub caps a webhook payload at 25 MB; an event file larger than that is not one."""


class ActionEnvError(ValueError):
    """The job's environment cannot run the app: the message says what to change."""


class ActionEnv(BaseModel):
    """The variables `bot action` reads (names as GitHub spells them, lower-cased)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    github_event_name: str
    github_event_path: Path
    github_token: SecretStr
    github_repository: str
    github_api_url: str = "https://api.github.com"
    github_server_url: str = "https://github.com"
    github_workspace: Path | None = None
    github_run_id: str
    github_run_attempt: str = "1"
    github_step_summary: Path | None = None
    runner_temp: Path | None = None

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> ActionEnv:
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {
            name.lower(): value
            for name, value in environ.items()
            if name.startswith(("GITHUB_", "RUNNER_")) and value != ""
        }
        try:
            env = cls.model_validate(values)
        except ValidationError as exc:
            missing = sorted(
                str(err["loc"][0]).upper() for err in exc.errors() if err["type"] == "missing"
            )
            if missing:
                raise ActionEnvError(
                    f"not a GitHub Actions job: {', '.join(missing)} unset"
                    + (
                        " (pass the job's token: `GITHUB_TOKEN: ${{ github.token }}`)"
                        if "GITHUB_TOKEN" in missing
                        else ""
                    )
                ) from None
            first = exc.errors()[0]
            raise ActionEnvError(
                f"{str(first['loc'][0]).upper()} cannot be read: {first['msg']}"
            ) from None
        if env.github_workspace is not None and not env.github_workspace.is_absolute():
            raise ActionEnvError(
                f"GITHUB_WORKSPACE is not an absolute path: {env.github_workspace}"
            )
        if env.github_repository.count("/") != 1:
            raise ActionEnvError(f"GITHUB_REPOSITORY is not owner/name: {env.github_repository!r}")
        return env

    @property
    def delivery_id(self) -> str:
        """The delivery's GUID: one per job run and attempt, so a re-run is a new delivery and
        a retried step of the same attempt is the same one."""
        return f"action-{self.github_run_id}-{self.github_run_attempt}"


def read_event(path: Path) -> object:
    """The event file's JSON; ActionEnvError when it is missing, too large or not JSON."""
    try:
        size = path.stat().st_size
        if size > MAX_EVENT_BYTES:
            raise ActionEnvError(f"the event file {path} is {size} bytes, more than a webhook's")
        text = path.read_bytes()
    except OSError as exc:
        raise ActionEnvError(f"the event file {path} cannot be read: {exc.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ActionEnvError(f"the event file {path} is not JSON: {exc}") from None
