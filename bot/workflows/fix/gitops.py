"""Reading a fix's change from the mirror, and making the one commit that is pushed.

Everything runs on the mirror's object database through `bot.git.hostgit`, never in the agent's
worktree: the agent's commits are read as objects, and the pushed commit is made with
`git commit-tree` from the agent's final tree, on top of the commit the fix started from.
That gives one commit per fix whatever the agent did (several commits, merges, odd
messages), authored by the app, with the requester's `Co-authored-by` trailer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from bot.agents.gitread import run_git
from bot.git import hostgit
from policies.config import FixConfig
from policies.diff import SYMLINK_MODE, parse_raw_diff, raw_diff_args
from policies.fix import Change, ModeChange, RiskReport, agent_commit_message, classify_change

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
    modes: tuple[ModeChange, ...] = ()
    """The paths that are or were submodule pointers or symbolic links, with link targets."""
    links: dict[str, str] | None = None
    """Every symbolic link of the changed tree (path -> target) when a link changed and the
    tree has few enough to read; None otherwise."""

    def risk(self, config: FixConfig) -> RiskReport | None:
        """`policies.fix.classify_change` on everything read here, so no caller forgets the
        modes, the links or the added text."""
        return classify_change(self.changes, config, self.added, modes=self.modes, links=self.links)


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


_CHANGE_ARGS = raw_diff_args(0)
"""One pass over the two trees: the patch after the records holds the added lines."""
_TARGET_CAP = 4096
_TREE_LINKS = 500
"""Links of the changed tree read to follow a changed link through the others; a tree with
more is judged link by link (each changed link on its own target)."""


async def change_facts(git_dir: Path, base: str, commit: str) -> ChangeFacts:
    """Statuses, line counts, modes and added text of the change, for
    `policies.fix.classify_change`."""
    raw = await _out(git_dir, [*_CHANGE_ARGS, base, commit])
    patches = parse_raw_diff(raw.decode("utf-8", "replace"))
    changes: list[Change] = []
    added: dict[str, str] = {}
    for patch in patches:
        binary = patch.binary
        changes.append(
            (
                patch.code or "M",
                patch.path,
                patch.old_path,
                None if binary else patch.additions,
                None if binary else patch.deletions,
            )
        )
        text = patch.added_text()
        if text:
            added[patch.path] = text
    special = [p for p in patches if p.submodule or p.symlink]
    new_links = {p.path: p.new_oid for p in special if p.new_mode == SYMLINK_MODE}
    links: dict[str, str] | None = None
    targets: dict[str, str] = {}
    if new_links:
        tree = await _tree_links(git_dir, commit)
        wanted = {**(tree if len(tree) <= _TREE_LINKS else {}), **new_links}
        targets = await _blobs(git_dir, wanted)
        if len(tree) <= _TREE_LINKS:
            links = {path: targets[path] for path in tree if path in targets}
    modes = tuple(
        ModeChange(p.path, p.old_mode, p.new_mode, p.old_oid, p.new_oid, targets.get(p.path))
        for p in special
    )
    return ChangeFacts(
        changes=changes,
        added=added,
        files=len(changes),
        insertions=sum(c[3] or 0 for c in changes),
        deletions=sum(c[4] or 0 for c in changes),
        modes=modes,
        links=links,
    )


async def _tree_links(git_dir: Path, commit: str) -> dict[str, str]:
    """Every symbolic link of `commit`'s tree: path -> its blob's id."""
    raw = await _out(git_dir, ["ls-tree", "-r", "-z", "--full-tree", commit])
    out: dict[str, str] = {}
    for record in raw.decode("utf-8", "replace").split("\0"):
        meta, _, path = record.partition("\t")
        fields = meta.split(" ")
        if len(fields) == 3 and fields[0] == SYMLINK_MODE and path:
            out[path] = fields[2]
    return out


async def _blobs(git_dir: Path, oids: dict[str, str]) -> dict[str, str]:
    """The text of each path's blob (link targets), read in one `cat-file --batch`; a blob
    that is missing or longer than a link target can be is left out."""
    listed = [(path, oid) for path, oid in oids.items() if re.fullmatch(r"[0-9a-f]{40,64}", oid)]
    if not listed:
        return {}
    done = await hostgit.run_async(
        ["cat-file", "--batch"],
        git_dir=git_dir,
        stdin="".join(f"{oid}\n" for _, oid in listed).encode(),
    )
    data = done.stdout
    out: dict[str, str] = {}
    at = 0
    for path, _oid in listed:
        end = data.find(b"\n", at)
        if end < 0:
            break
        header = data[at:end].split(b" ")
        at = end + 1
        if len(header) != 3 or not header[2].isdigit():
            continue  # "<oid> missing"
        size = int(header[2])
        if header[1] == b"blob" and size <= _TARGET_CAP:
            out[path] = data[at : at + size].decode("utf-8", "replace")
        at += size + 1
    return out


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


async def made_by_on(git_dir: Path, commit: str, parent: str, email: str) -> bool:
    """Whether `commit` is in the mirror, has the single parent `parent` and was committed
    by `email` (the app's identity): the app's own commit on that head. False for a commit
    the mirror lacks (someone else's, pushed from elsewhere)."""
    done = await run_git(["log", "-1", "--format=%P%x00%ce", commit, "--"], git_dir=git_dir)
    if done.code != 0:
        return False
    parents, _, committer = done.stdout.decode("utf-8", "replace").strip().partition("\0")
    return parents.split() == [parent] and committer == email
