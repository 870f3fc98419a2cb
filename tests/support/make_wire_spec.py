"""Make ``tests/support/openai-wire.json``: the wire facts the tests need from OpenAI's OpenAPI
description, and nothing else.

    python -m tests.support.make_wire_spec [PATH/TO/openai-openapi.yaml]

The source is OpenAI's own OpenAPI document (MIT; by default ``../shared/spec/`` beside the
repository, where it is kept with its provenance). The output holds the component schemas the
tests validate against (:data:`ROOTS`) and every schema they reference, reduced to what a body
on the wire must be — field names, types, enums, ``const``, required lists, ``nullable``,
unions and their discriminators, bounds and patterns — with the prose (descriptions, titles,
examples, defaults, ``x-*`` annotations) stripped. It records the file, version and sha256 it
came from, so an update is a reviewable diff of facts. The tests read only the output: a
clone with nothing beside it passes.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SOURCE = ROOT.parent / "shared" / "spec" / "openai-openapi.yaml"
OUT = Path(__file__).with_name("openai-wire.json")
LICENSE = "MIT, Copyright (c) OpenAI (https://openai.com); see the source repository openai/openai-openapi"

# The components the tests validate bodies against or read fields of.
ROOTS = (
    "Batch",
    "ChatCompletionDeleted",
    "ChatCompletionList",
    "ChatCompletionMessageList",
    "CompactResource",
    "ConversationItem",
    "ConversationItemList",
    "ConversationResource",
    "CreateChatCompletionRequest",
    "CreateChatCompletionResponse",
    "CreateChatCompletionStreamResponse",
    "CreateCompletionRequest",
    "CreateCompletionResponse",
    "CreateEmbeddingResponse",
    "CreateModerationResponse",
    "DeleteFileResponse",
    "DeleteModelResponse",
    "DeletedConversationResource",
    "ErrorResponse",
    "ImagesResponse",
    "ListBatchesResponse",
    "ListFilesResponse",
    "ListModelsResponse",
    "Model",
    "OpenAIFile",
    "Response",
    "ResponseItemList",
    "ResponseStreamEvent",
    "TokenCountsResource",
    "Upload",
    "UploadPart",
)
# Schema keywords that carry no wire fact.
PROSE = frozenset({"description", "title", "example", "examples", "default", "deprecated", "externalDocs"})
# Keywords whose value maps names to schemas (their keys are names, kept whatever they are).
NAMED = frozenset({"properties", "patternProperties", "$defs", "definitions"})


def facts(node: Any) -> Any:
    """``node`` (a schema) without its prose; names under ``properties`` are all kept."""
    if isinstance(node, list):
        return [facts(item) for item in node]
    if not isinstance(node, dict):
        return node
    kept: dict[str, Any] = {}
    for key, value in node.items():
        if key in PROSE or key.startswith("x-"):
            continue
        kept[key] = {name: facts(schema) for name, schema in value.items()} if key in NAMED else facts(value)
    return kept


def references(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith("#/components/schemas/"):
                found.add(value.rsplit("/", 1)[-1])
            else:
                references(value, found)
    elif isinstance(node, list):
        for item in node:
            references(item, found)


def extract(source: Path) -> dict[str, Any]:
    raw = source.read_bytes()
    document = yaml.load(raw, Loader=yaml.CSafeLoader)
    schemas: dict[str, Any] = document["components"]["schemas"]
    wanted: set[str] = set()
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        found: set[str] = set()
        references(schemas[name], found)
        todo.extend(sorted(found - wanted))
    provenance = source.with_name("PROVENANCE.md")
    commit = re.search(r"Commit: ([0-9a-f]{40})", provenance.read_text()) if provenance.is_file() else None
    return {
        "source": {
            "repository": "openai/openai-openapi",
            "commit": commit.group(1) if commit else None,
            "file": source.name,
            "openapi": document["openapi"],
            "version": document["info"]["version"],
            "sha256": hashlib.sha256(raw).hexdigest(),
            "license": LICENSE,
            "made_by": "python -m tests.support.make_wire_spec",
        },
        "roots": list(ROOTS),
        "components": {"schemas": {name: facts(schemas[name]) for name in sorted(wanted)}},
    }


def main(argv: list[str]) -> int:
    source = Path(argv[0]) if argv else DEFAULT_SOURCE
    if not source.is_file():
        print(f"no OpenAPI document at {source}", file=sys.stderr)
        return 2
    wire = extract(source)
    OUT.write_text(json.dumps(wire, indent=1, sort_keys=False, ensure_ascii=False) + "\n")
    count = len(wire["components"]["schemas"])
    print(f"{count} component schemas → {OUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
