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
}


@pytest.mark.parametrize("path", sorted(POLICIES.glob("*.py")), ids=lambda p: p.name)
def test_policy_module_imports_only_pure_modules(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            assert name.split(".")[0] in ALLOWED_ROOTS, f"{path.name} imports {name}"
