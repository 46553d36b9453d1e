"""What one read_file or grep call may cost: every line capped, large files paged as a stream
(never read whole), and grep stopped at its own short time limit."""

from __future__ import annotations

import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from bot.agents.large_files import WHOLE_READ_LIMIT
from bot.agents.rendering import READ_BYTES_CAP, READ_LINE_CAP, render_text
from bot.agents.tools import Toolbox, ToolError
from bot.agents.types import EXPLORER, IMPLEMENTER
from bot.engine.types import Workspace
from bot.engine.worktree import create_worktree
from tests.agents.conftest import make_repo

pytestmark = pytest.mark.anyio

# A file several times over the whole-read limit, of numbered lines, plus one over-long line.
BIG_LINES = 400_000
WIDE = 8_400_000


def big_text() -> str:
    return "".join(f"row {i:07}\n" for i in range(1, BIG_LINES + 1))


# --- every line is capped -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "offset", "line"),
    [
        pytest.param(b"x" * (WHOLE_READ_LIMIT - 10) + b"\nshort\n", 1, 1, id="first-line"),
        pytest.param(b"short\n" + b"y" * (WHOLE_READ_LIMIT - 10) + b"\n", 2, 2, id="page-start"),
        pytest.param(b"short\n" + b"z" * (WHOLE_READ_LIMIT - 10), 1, 2, id="last-line"),
    ],
)
def test_render_text_cuts_every_over_long_line(data: bytes, offset: int, line: int) -> None:
    out = render_text("min.js", data, offset=offset)
    assert len(out) < READ_LINE_CAP + 2000
    shown = next(text for text in out.splitlines() if text.lstrip().startswith(f"{line}\t"))
    assert shown.endswith(f"[line cut: {WHOLE_READ_LIMIT - 10} characters in all]")


# --- large files are paged, never read whole ------------------------------------------------


@pytest.fixture(scope="module")
def big_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("big") / "repo"
    files = {
        "big.log": big_text(),
        "wide.min.js": "v" * WIDE + "\nsecond line\n",
        "small.txt": "just a small file\n",
        "big.bin": "\0" * (WHOLE_READ_LIMIT + 1),
    }
    return make_repo(root, files)


Reading = Callable[..., Awaitable[str]]


_RUNS = iter(range(1, 10_000))


@pytest.fixture(params=["commit", "local", "worktree"])
async def reading(
    request: pytest.FixtureRequest, big_repo: tuple[Path, str]
) -> AsyncIterator[Reading]:
    """read_file on the same files from the object database, a local tree and a worktree."""
    root, sha = big_repo
    if request.param == "commit":
        box = Toolbox(Workspace(git_dir=root / ".git", commit=sha), EXPLORER.tools)
    elif request.param == "local":
        box = Toolbox(Workspace(local_root=root), EXPLORER.tools)
    else:
        run = f"wf_{next(_RUNS):012x}"
        wt = create_worktree(root, base=sha, run_id=run, index=1, label="big")
        box = Toolbox(
            Workspace(git_dir=root / ".git", commit=sha, worktree=wt.path, branch=wt.branch),
            IMPLEMENTER.tools,
        )

    async def read(**args: Any) -> str:
        return await box.call("read_file", args)

    yield read
    await box.aclose()


async def measured(read: Reading, **args: Any) -> tuple[str, int]:
    """The answer and the most memory Python held while producing it."""
    tracemalloc.start()
    try:
        out = await read(**args)
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


async def test_a_large_file_is_described_and_paged_not_read_whole(reading: Reading) -> None:
    size = len(big_text())
    out, peak = await measured(reading, path="big.log")
    assert peak < WHOLE_READ_LIMIT  # the 4.4 MB file was never held whole
    lines = out.splitlines()
    assert lines[0] == (
        f"big.log is {size} bytes, too large to read whole (over {WHOLE_READ_LIMIT}); "
        "it is read as a stream, one page at a time."
    )
    assert lines[1] == "     1\trow 0000001"
    assert lines[-1] == (
        "[showing lines 1-2000; read on with offset=2001, or find lines with grep and its `path`]"
    )


async def test_a_page_deep_in_a_large_file(reading: Reading) -> None:
    out, peak = await measured(reading, path="big.log", offset=BIG_LINES - 2, limit=50)
    assert peak < WHOLE_READ_LIMIT
    assert out.splitlines()[1:] == [
        f"{BIG_LINES - 2:>6}\trow {BIG_LINES - 2:07}",
        f"{BIG_LINES - 1:>6}\trow {BIG_LINES - 1:07}",
        f"{BIG_LINES:>6}\trow {BIG_LINES:07}",
        f"[showing lines {BIG_LINES - 2}-{BIG_LINES} of {BIG_LINES}]",
    ]
    with pytest.raises(ToolError, match=f"big.log has {BIG_LINES} lines; offset"):
        await reading(path="big.log", offset=BIG_LINES + 5)


async def test_an_over_long_line_of_a_large_file_is_cut(reading: Reading) -> None:
    out, peak = await measured(reading, path="wide.min.js")
    assert peak < WHOLE_READ_LIMIT
    assert len(out) < READ_LINE_CAP + 1000
    first, second = out.splitlines()[1:3]
    assert first.startswith("     1\tvvvv") and first.endswith(f"[line cut: {WIDE} bytes in all]")
    assert second == "     2\tsecond line"


async def test_a_large_binary_file_is_described(reading: Reading) -> None:
    out, peak = await measured(reading, path="big.bin")
    assert peak < WHOLE_READ_LIMIT
    assert out == (
        f"big.bin is a binary file ({WHOLE_READ_LIMIT + 1} bytes, application/octet-stream); "
        "its content is not shown."
    )


async def test_small_files_read_as_before(reading: Reading) -> None:
    assert await reading(path="small.txt") == "     1\tjust a small file"


async def test_the_object_reader_stays_usable_after_a_page(big_repo: tuple[Path, str]) -> None:
    """Stopping a stream early leaves the shared `cat-file --batch` pipe usable."""
    root, sha = big_repo
    box = Toolbox(Workspace(git_dir=root / ".git", commit=sha), EXPLORER.tools)
    try:
        for _ in range(2):
            assert "row 0000001" in await box.call("read_file", {"path": "big.log"})
            assert "small file" in await box.call("read_file", {"path": "small.txt"})
    finally:
        await box.aclose()


# --- grep has its own time limit and no back-references -----------------------------------


@pytest.fixture
def slow_repo(tmp_path: Path) -> tuple[Path, str]:
    """A line on which `(a|aa)*c` takes git's regex engine minutes (quadratic or worse)."""
    return make_repo(tmp_path / "slow", {"slow.txt": "a" * 200_000 + "\n", "ok.txt": "fine\n"})


@pytest.mark.parametrize("where", ["commit", "local"])
async def test_grep_stops_at_its_own_time_limit(slow_repo: tuple[Path, str], where: str) -> None:
    root, sha = slow_repo
    workspace = (
        Workspace(git_dir=root / ".git", commit=sha)
        if where == "commit"
        else Workspace(local_root=root)
    )
    box = Toolbox(workspace, EXPLORER.tools, grep_timeout=1.0)
    try:
        with anyio.fail_after(60):  # a guard only: without the limit this runs for minutes
            with pytest.raises(ToolError, match=r"grep stopped after 1 s"):
                await box.call("grep", {"pattern": "(a|aa)*c"})
        assert await box.call("grep", {"pattern": "fine"}) == "ok.txt:1:fine"
    finally:
        await box.aclose()


@pytest.mark.parametrize(
    "pattern",
    [
        pytest.param(r"(a*)(a*)\2\1b", id="two"),
        pytest.param(r"(x)\1", id="one"),
        pytest.param(r"\\\(a\)\1", id="escaped-paren"),
    ],
)
async def test_grep_refuses_back_references(slow_repo: tuple[Path, str], pattern: str) -> None:
    root, sha = slow_repo
    box = Toolbox(Workspace(git_dir=root / ".git", commit=sha), EXPLORER.tools)
    try:
        with anyio.fail_after(60):
            with pytest.raises(ToolError, match="back-references"):
                await box.call("grep", {"pattern": pattern})
        # Literally, the same text is fine, and so is an escaped backslash before a digit.
        assert await box.call("grep", {"pattern": pattern, "fixed_string": True}) == "no matches"
        assert await box.call("grep", {"pattern": r"\\1"}) == "no matches"
    finally:
        await box.aclose()


async def test_grep_never_uses_perl_regexes_even_when_the_repository_asks(
    slow_repo: tuple[Path, str],
) -> None:
    root, _ = slow_repo
    (root / ".git" / "config").write_text(
        (root / ".git" / "config").read_text() + "[grep]\n\tpatternType = perl\n"
    )
    box = Toolbox(Workspace(local_root=root), EXPLORER.tools)
    # `\d` is a digit only to PCRE; extended POSIX syntax reads it as a plain `d`.
    (root / "digits.txt").write_text("123\nd\n")
    assert await box.call("grep", {"pattern": r"\d", "path": "digits.txt"}) == "digits.txt:2:d"


async def test_grep_cuts_over_long_matching_lines(tmp_path: Path) -> None:
    root, sha = make_repo(tmp_path / "wide", {"wide.txt": "needle" + "w" * 1_000_000 + "\n"})
    box = Toolbox(Workspace(git_dir=root / ".git", commit=sha), EXPLORER.tools)
    try:
        out = await box.call("grep", {"pattern": "needle"})
        assert out.startswith("wide.txt:1:needle")
        assert out.endswith(f"[line cut: {len('wide.txt:1:needle') + 1_000_000} characters in all]")
        assert len(out) < READ_LINE_CAP + 200
    finally:
        await box.aclose()


def test_caps_fit_in_one_page() -> None:
    assert READ_LINE_CAP * 4 < READ_BYTES_CAP < WHOLE_READ_LIMIT
