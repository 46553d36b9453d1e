"""`policies/` decides and `bot/` acts: policies import nothing with effects."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

POLICIES = Path(__file__).resolve().parents[1] / "policies"
ALLOWED_ROOTS = {
    "__future__",
    "collections",
    "dataclasses",
    "enum",
    "typing",
    "re",
    "fnmatch",
    "pydantic",
    "yaml",
    "json",
    "hashlib",
    "hmac",
    "string",
    "textwrap",
    "functools",
    "itertools",
    "policies",
    "unicodedata",
    "math",
    "bisect",
    # Pure encodings, for the review memory's hidden marker.
    "base64",
    "binascii",
    "zlib",
    # A CommonMark parser: pure, it reads a string and returns tokens.
    "markdown_it",
    # Shell words split and quoted (a lint command's tool, its `{files}`): string functions.
    "shlex",
}


def imported_modules(path: Path) -> list[str]:
    """Every absolute module name `path` imports."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


# Parsed while the tests are collected: CPython 3.11's ast.parse is not thread-safe, and the
# traceback module parses too, so a server thread left formatting an error from another test
# could make a parse during the run fail with "AST constructor recursion depth mismatch".
IMPORTS = {path.name: imported_modules(path) for path in sorted(POLICIES.glob("*.py"))}


@pytest.mark.parametrize("module", sorted(IMPORTS))
def test_policy_module_imports_only_pure_modules(module: str) -> None:
    for name in IMPORTS[module]:
        assert name.split(".")[0] in ALLOWED_ROOTS, f"{module} imports {name}"
