"""The catalog's checks, layering and answers, without a server: pure functions of the definitions."""

from __future__ import annotations

from typing import Any

import pytest

from mockserver.mcp_fakes import answers
from mockserver.mcp_fakes.faults import rule_path
from mockserver.mcp_fakes.parse import CatalogError, parse_catalog

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
OUT = {"type": "object", "properties": {"celsius": {"type": "integer"}}, "required": ["celsius"]}


def tool(**extra: Any) -> dict[str, Any]:
    return {"name": "weather", "description": "d", "inputSchema": SCHEMA, **extra}


def test_a_session_layer_replaces_by_name_and_keeps_the_rest() -> None:
    below = parse_catalog({"tools": [tool(), {"name": "clock", "inputSchema": {"type": "object"}}]})
    above = parse_catalog({"tools": [tool(description="mine")]})
    merged = above.over(below)
    assert [(t.name, t.description) for t in merged.tools] == [("clock", ""), ("weather", "mine")]
    assert parse_catalog(merged.to_json()) == merged  # what the state keeps reads back the same


def test_a_template_matches_its_instances_only() -> None:
    (resource,) = parse_catalog({"resources": [{"uri": "notes://{a}/x/{b}", "name": "n", "text": "{a}+{b}"}]}).resources
    assert resource.template and resource.match("notes://one/x/two") == {"a": "one", "b": "two"}
    assert resource.match("notes://one/y/two") is None and resource.match("notes://a/b/x/c") is None


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([], ""),
        ({"tools": {}}, "tools"),
        ({"tools": [tool(), tool()]}, "tools[1].name"),
        ({"tools": [tool(name="has space")]}, "tools[0].name"),
        ({"tools": [tool(result=[])]}, "tools[0].result"),
        (
            {"tools": [tool(outputSchema=OUT, result={"content": [], "structuredContent": {"celsius": "hot"}})]},
            "tools[0].result",
        ),
        (
            {"tools": [tool(result=[{"content": []}, {"isError": "maybe", "content": []}])]},
            "tools[0].result[1].isError",
        ),
        ({"tools": [tool(fault="mcp.latency=5")]}, "tools[0].fault"),
        ({"resources": [{"uri": "plain", "name": "n", "text": "t"}]}, "resources[0].uri"),
        ({"prompts": [{"name": "p", "arguments": [], "messages": []}]}, "prompts[0].messages"),
        (
            {"prompts": [{"name": "p", "arguments": [], "messages": [{"role": "system", "content": "x"}]}]},
            "prompts[0].messages[0].role",
        ),
    ],
    ids=[
        "not-object",
        "tools-not-list",
        "twice",
        "bad-name",
        "empty-sequence",
        "off-schema-result",
        "sequence-item",
        "tool-fault-not-error",
        "not-uri",
        "no-messages",
        "bad-role",
    ],
)
def test_a_wrong_definition_names_its_field(data: Any, field: str) -> None:
    with pytest.raises(CatalogError) as error:
        parse_catalog(data)
    assert error.value.field == field


def test_a_call_is_checked_then_scripted_then_drawn() -> None:
    catalog = parse_catalog(
        {
            "tools": [
                tool(outputSchema=OUT),
                tool(name="seq", result=[{"content": []}, {"content": [], "isError": True}]),
            ]
        }
    )
    drawn, seq = catalog.tools
    bad = answers.tool_result(drawn, {"days": 2}, 1, 7, failed=False)
    assert bad["isError"] and "'city'" in bad["content"][0]["text"]
    wrong_type = answers.tool_result(drawn, {"city": "Rome", "days": "two"}, 1, 7, failed=False)
    assert "'days'" in wrong_type["content"][0]["text"]
    seed = answers.call_seed(0, "weather", {"city": "Rome"})
    assert (
        seed == answers.call_seed(0, "weather", {"city": "Rome"}) != answers.call_seed(1, "weather", {"city": "Rome"})
    )
    first = answers.tool_result(drawn, {"city": "Rome"}, 1, seed, failed=False)
    assert first == answers.tool_result(drawn, {"city": "Rome"}, 5, seed, failed=False)  # seeded, not counted
    assert isinstance(first["structuredContent"]["celsius"], int)
    assert [answers.tool_result(seq, {"city": "x"}, n, 0, failed=False).get("isError") for n in (1, 2, 3)] == [
        False,  # the SDK model fills the default in
        True,
        True,
    ]
    assert answers.tool_result(seq, {"city": "x"}, 1, 0, failed=True)["isError"]  # the mcp.error fault


def test_prompts_and_resources_answer_or_name_what_is_missing() -> None:
    catalog = parse_catalog(
        {
            "resources": [
                {"uri": "docs://{name}", "name": "d", "text": "doc {name}"},
                {"uri": "docs://index", "name": "i", "text": "all"},
            ],
            "prompts": [
                {
                    "name": "p",
                    "arguments": [{"name": "who", "required": True}],
                    "messages": [{"role": "user", "content": "hi {who}"}],
                }
            ],
        }
    )
    assert answers.read(catalog, "docs://index")["contents"][0]["text"] == "all"  # the exact URI before the template
    assert answers.read(catalog, "docs://x")["contents"][0]["text"] == "doc x"
    with pytest.raises(answers.McpProblem) as missing:
        answers.read(catalog, "files://x")
    assert missing.value.code == -32002
    assert answers.prompt(catalog, "p", {"who": "Ann"})["messages"][0]["content"]["text"] == "hi Ann"
    with pytest.raises(answers.McpProblem, match="'who'"):
        answers.prompt(catalog, "p", {})


def test_rules_match_an_mcp_message_by_method_and_name() -> None:
    assert rule_path({"method": "tools/call", "params": {"name": "search"}}) == "/mcp/tools/call/search"
    assert rule_path({"method": "resources/read", "params": {"uri": "x://y"}}) == "/mcp/resources/read"
