"""Cut the operations the fake GitHub serves out of GitHub's OpenAPI description (a fixture).

    python -m tests.fakes._github_openapi_extract octokit-openapi-23.0.2.tgz \
        fixtures/openapi/operations.json

(`scripts/openapi_extract` fetches the pinned tarball and runs this.) The tarball is npm's
`@octokit/openapi`; its `generated/api.github.com.json` is GitHub's own description
(github/rest-api-description) with Octokit's `x-octokit` extension. What is kept: for each
route of the fake (`FakeGitHub().app.routes`) the one operation of the same method and path
shape, its parameters and its JSON request body, and every component those `$ref` (the
closure); descriptions, examples and vendor extensions other than `x-multi-segment` are
dropped, so the fixture stays small. A route with no operation, other than the ones
`NOT_REST` names, stops the script: the fake would be serving something GitHub does not.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tarfile
from pathlib import Path
from typing import Any

from tests.fakes._github_openapi import NOT_REST, find_operation

MEMBER = "package/generated/api.github.com.json"
PACKAGE = "@octokit/openapi"
_DROP = {"description", "examples", "example", "summary", "externalDocs", "tags"}
_KEEP_EXTENSIONS = {"x-multi-segment"}
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def served_routes() -> list[tuple[str, str]]:
    """(method, path template) of every route the fake GitHub serves."""
    from tests.fakes import _github_openapi
    from tests.fakes.github import FakeGitHub

    _github_openapi.BIND_ROUTES = False
    try:
        app = FakeGitHub().app
    finally:
        _github_openapi.BIND_ROUTES = True
    routes = []
    for route in app.routes:
        method, _, template = str(getattr(route, "name", "")).partition(" ")
        if method in (m.upper() for m in _METHODS):
            routes.append((method, template))
    return routes


def _clean(node: Any, *, names: bool = False) -> Any:
    """`node` without documentation keys; under `properties` the keys are field names."""
    if isinstance(node, list):
        return [_clean(item) for item in node]
    if not isinstance(node, dict):
        return node
    if names:
        return {key: _clean(value) for key, value in node.items()}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP or (key.startswith("x-") and key not in _KEEP_EXTENSIONS):
            continue
        if key in ("enum", "default", "const"):
            out[key] = value
        else:
            out[key] = _clean(value, names=key in ("properties", "patternProperties"))
    return out


def _refs(node: Any) -> list[str]:
    if isinstance(node, list):
        return [ref for item in node for ref in _refs(item)]
    if not isinstance(node, dict):
        return []
    own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
    return own + [ref for key, value in node.items() if key != "$ref" for ref in _refs(value)]


def _resolve(doc: dict[str, Any], ref: str) -> Any:
    if not ref.startswith("#/"):
        raise ValueError(f"only local references are expected, got {ref}")
    node: Any = doc
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def extract(doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The fixture for the fake's routes, and the routes with no operation (beyond NOT_REST)."""
    operations: dict[str, Any] = {}
    missing: list[str] = []
    keys = [f"{m.upper()} {p}" for p, item in doc["paths"].items() for m in item if m in _METHODS]
    for method, template in served_routes():
        key = find_operation(method, template, keys)
        if key is None:
            if f"{method} {template}" not in NOT_REST:
                missing.append(f"{method} {template}")
            continue
        path = key.split(" ", 1)[1]
        item = doc["paths"][path]
        op = item[method.lower()]
        kept: dict[str, Any] = {
            "operationId": op["operationId"],
            "documentation_url": op.get("externalDocs", {}).get("url"),
            "tag": (op.get("tags") or [""])[0],
            "parameters": _clean(item.get("parameters", []) + op.get("parameters", [])),
        }
        if "requestBody" in op:
            kept["requestBody"] = _clean(op["requestBody"])
        operations[key] = kept
    components: dict[str, dict[str, Any]] = {}
    pending = _refs(operations)
    while pending:
        ref = pending.pop()
        _, section, name = ref[2:].split("/")  # "#/components/<section>/<name>"
        if name in components.get(section, {}):
            continue
        target = _clean(_resolve(doc, ref))
        components.setdefault(section, {})[name] = target
        pending.extend(_refs(target))
    fixture = {
        "openapi": doc["openapi"],
        "info": {"version": doc["info"]["version"], "license": doc["info"]["license"]},
        "operations": dict(sorted(operations.items(), key=lambda kv: kv[0].split(" ")[::-1])),
        "components": {s: dict(sorted(c.items())) for s, c in sorted(components.items())},
    }
    return fixture, missing


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tests.fakes._github_openapi_extract TARBALL OUT.json")
        return 2
    tarball, out = Path(argv[0]), Path(argv[1])
    raw = tarball.read_bytes()
    with tarfile.open(tarball) as archive:
        package = json.load(archive.extractfile("package/package.json"))  # type: ignore[arg-type]
        doc = json.load(archive.extractfile(MEMBER))  # type: ignore[arg-type]
    if package["name"] != PACKAGE:
        print(f"{tarball} is {package['name']}, not {PACKAGE}")
        return 1
    fixture, missing = extract(doc)
    if missing:
        print("routes of the fake that GitHub's description does not have:")
        print("\n".join(f"  {route}" for route in missing))
        return 1
    fixture = {
        "source": {
            "package": f"{PACKAGE}@{package['version']}",
            "file": MEMBER.removeprefix("package/"),
            "tarball_sha256": hashlib.sha256(raw).hexdigest(),
            "license": package.get("license", "MIT"),
        },
        **fixture,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(fixture, indent=1, sort_keys=False) + "\n")
    print(f"{out}: {len(fixture['operations'])} operations, {out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
