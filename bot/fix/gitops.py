"""Reading a fix's change from the mirror, and making the one commit that is pushed.

Everything runs on the mirror's object database through `bot.hostgit`, never in the agent's
worktree: the agent's commits are read as objects, and the pushed commit is made with
`git commit-tree` from the agent's final tree, on top of the commit the fix started from.
That gives one commit per fix whatever the agent did (several commits, merges, odd
messages), authored by the app, with the requester's `Co-authored-by` trailer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot import hostgit
from bot.agents.gitread import run_git
from policies.fix import Change, agent_commit_message

DIFF_CAP = 200_000
PATCH_CAP = 60_000


class FixGitError(RuntimeError):
    """A git step of the fix failed; the message says which."""


@dataclass(frozen=True, slots=True)
class ChangeFacts:
    """The change between the start commit and the agent's commit."""

    changes: list[Change]
    added: dict[str, str]
    """Per path, the added lines (for the credential scan)."""
    files: int
    insertions: int
    deletions: int


async def _out(git_dir: Path, args: list[str]) -> bytes:
    done = await run_git(args, git_dir=git_dir)
    if done.code != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise FixGitError(f"git {args[0]} failed: {detail[-1] if detail else 'no output'}")
    return done.stdout


async def diff_text(git_dir: Path, base: str, commit: str, cap: int = DIFF_CAP) -> str:
    """The unified diff from `base` to `commit`, cut at `cap` characters (said so)."""
    raw = await _out(
        git_dir, ["diff", "--no-color", "--no-ext-diff", "-M", "--full-index", base, commit]
    )
    text = raw.decode("utf-8", "replace")
    if len(text) > cap:
        return text[:cap] + f"\n… (diff cut at {cap:,} characters)"
    return text


async def change_facts(git_dir: Path, base: str, commit: str) -> ChangeFacts:
    """Name-status, numstat and added text of the change, for `policies.fix.classify_change`."""
    status = await _out(
        git_dir, ["diff", "--no-ext-diff", "--name-status", "-z", "-M", base, commit]
    )
    numstat = await _out(git_dir, ["diff", "--no-ext-diff", "--numstat", "-z", "-M", base, commit])
    parts = status.decode("utf-8", "replace").split("\0")
    entries: list[tuple[str, str, str | None]] = []
    i = 0
    while i < len(parts) and parts[i]:
        code = parts[i][:1]
        if code in ("R", "C") and i + 2 < len(parts):
            entries.append((code, parts[i + 2], parts[i + 1]))
            i += 3
        elif i + 1 < len(parts):
            entries.append((code, parts[i + 1], None))
            i += 2
        else:
            break
    counts = _numstat(numstat.decode("utf-8", "replace"))
    changes: list[Change] = []
    for code, path, old in entries:
        added, deleted = counts.get(path, (None, None))
        changes.append((code, path, old, added, deleted))
    texts = await _added_text(git_dir, base, commit)
    return ChangeFacts(
        changes=changes,
        added=texts,
        files=len(changes),
        insertions=sum(c[3] or 0 for c in changes),
        deletions=sum(c[4] or 0 for c in changes),
    )


def _numstat(text: str) -> dict[str, tuple[int | None, int | None]]:
    """path -> (added, deleted) from `--numstat -z` (renames put the paths in two fields)."""
    out: dict[str, tuple[int | None, int | None]] = {}
    parts = text.split("\0")
    i = 0
    while i < len(parts) and parts[i]:
        fields = parts[i].split("\t")
        if len(fields) < 3:
            break
        added = None if fields[0] == "-" else int(fields[0])
        deleted = None if fields[1] == "-" else int(fields[1])
        if fields[2] == "" and i + 2 < len(parts):  # a rename: old and new paths follow
            out[parts[i + 2]] = (added, deleted)
            i += 3
        else:
            out[fields[2]] = (added, deleted)
            i += 1
    return out


async def _added_text(git_dir: Path, base: str, commit: str) -> dict[str, str]:
    raw = await _out(
        git_dir, ["diff", "--no-color", "--no-ext-diff", "-M", "--unified=0", base, commit]
    )
    added: dict[str, list[str]] = {}
    path = ""
    for line in raw.decode("utf-8", "replace").splitlines()[:200_000]:
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else ""
        elif line.startswith("+") and path:
            added.setdefault(path, []).append(line[1:])
    return {p: "\n".join(lines) for p, lines in added.items()}


async def commit_message(git_dir: Path, base: str, commit: str) -> str:
    """The agent's commit messages (oldest first), made one tidy message without trailers
    or closing keywords (`policies.fix.agent_commit_message`)."""
    raw = await _out(git_dir, ["log", "--format=%B%x00", "--reverse", f"{base}..{commit}"])
    return agent_commit_message(raw.decode("utf-8", "replace").split("\0"))


async def squash(
    git_dir: Path, base: str, commit: str, message: str, *, name: str, email: str
) -> str:
    """A new commit with `commit`'s tree on top of `base`, by the app; its id."""
    tree = (await _out(git_dir, ["rev-parse", "--verify", f"{commit}^{{tree}}"])).decode().strip()
    identity = {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }
    done = await hostgit.run_async(
        ["commit-tree", tree, "-p", base, "-F", "-"],
        git_dir=git_dir,
        extra_env=identity,
        stdin=message.encode("utf-8"),
    )
    if done.returncode != 0:
        raise FixGitError(
            "git commit-tree failed: " + done.stderr.decode("utf-8", "replace")[-300:]
        )
    return done.stdout.decode().strip()


async def resolve(git_dir: Path, ref: str) -> str:
    """The commit id `ref` names in the mirror."""
    return (await _out(git_dir, ["rev-parse", "--verify", f"{ref}^{{commit}}"])).decode().strip()
