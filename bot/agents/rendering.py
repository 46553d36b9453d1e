"""How tool output is shown to a model: numbered pages, caps and visible truncation markers."""

from __future__ import annotations

import mimetypes

from bot.agents.paths import ToolError

READ_BYTES_CAP = 256 * 1024
READ_LINES_DEFAULT = 2000
READ_LINE_CAP = 4000
"""Characters of one line shown by read_file and grep; the rest is dropped, with its length."""
OUTPUT_CAP = 64 * 1024
# A tool's answer to the model: a full page of read_file plus its marker.
TOOL_RESULT_CAP = READ_BYTES_CAP + 4096


def describe_binary(path: str, size: int) -> str:
    kind = mimetypes.guess_type(path)[0] or "unknown type"
    return f"{path} is a binary file ({size} bytes, {kind}); its content is not shown."


def cut_line(text: str, full: str) -> str:
    """`text` cut to READ_LINE_CAP characters, saying how long it was (`full`) when cut."""
    if len(text) <= READ_LINE_CAP:
        return text
    return f"{text[:READ_LINE_CAP]} ... [line cut: {full} in all]"


def render_text(path: str, data: bytes, offset: int = 1, limit: int = READ_LINES_DEFAULT) -> str:
    """Numbered lines of a text file, capped, with a marker saying how to read on."""
    if b"\0" in data[:8192]:
        return describe_binary(path, len(data))
    lines = data.decode("utf-8", "replace").splitlines()
    total = len(lines)
    if total == 0:
        return f"{path} is empty."
    start = max(1, offset)
    if start > total:
        raise ToolError(f"{path} has {total} lines; offset {start} is past the end")
    shown: list[str] = []
    size = 0
    end = start - 1
    for number in range(start, min(total, start + max(1, limit) - 1) + 1):
        text = lines[number - 1]
        line = f"{number:>6}\t{cut_line(text, f'{len(text)} characters')}"
        if size + len(line) + 1 > READ_BYTES_CAP and shown:
            break
        shown.append(line)
        size += len(line) + 1
        end = number
    text = "\n".join(shown)
    if end < total or start > 1:
        text += f"\n[showing lines {start}-{end} of {total}"
        text += f"; read on with offset={end + 1}]" if end < total else "]"
    return text


def cap_output(text: str, cap: int = OUTPUT_CAP, what: str = "output") -> str:
    encoded = text.encode("utf-8", "replace")
    if len(encoded) <= cap:
        return text
    head = encoded[:cap].decode("utf-8", "ignore")
    return head + f"\n[{what} truncated: {len(encoded)} bytes in all, first {cap} shown]"


def cap_lines(lines: list[str], cap: int, what: str) -> str:
    if len(lines) > cap:
        return "\n".join(lines[:cap]) + f"\n[{what} truncated: {len(lines)} in all, {cap} shown]"
    return "\n".join(lines)
