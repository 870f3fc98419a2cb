"""Provider profiles as data: OpenAI's documented fields are the spec's, every profile is
complete, and every field we honour some provider documents. (The profiles served:
tests/server/test_profiles.py.)"""

from __future__ import annotations

import pytest

from mockserver.profiles import OPENAI, PROFILES, profile_named
from mockserver.schemas.chat import ChatRequest
from mockserver.schemas.completions import CompletionRequest
from tests.support.spec import request_fields


def test_openais_documented_fields_are_the_specs() -> None:
    assert OPENAI.documented["completions"] == request_fields("CreateCompletionRequest")
    assert OPENAI.documented["chat"] == request_fields("CreateChatCompletionRequest")


def test_every_profile_is_complete_and_named_for_its_prefix() -> None:
    openai_wire = {"openai", "fireworks", "together", "nebius", "nebul", "nebulablock", "tokenhub", "vllm"}
    own_wire = {"anthropic", "gemini"}  # wires of their own: their fields are not OpenAI's
    assert set(PROFILES) == openai_wire | own_wire
    for name, profile in PROFILES.items():
        assert profile.name == name and profile.notes and profile.models
        assert set(profile.documented) == {"completions", "chat"}
        if name in own_wire:
            assert "model" in profile.documented["chat"] and profile.error_style == name
            continue
        assert {"model", "messages"} <= profile.documented["chat"]
        assert {"model", "prompt"} <= profile.documented["completions"]
    with pytest.raises(ValueError, match="known: openai"):
        profile_named("acme")


def test_every_sampling_field_we_honour_is_documented_somewhere() -> None:
    """The lenient default accepts every extension *some* profile documents; a field in our
    schemas that no provider documents would be an invention."""
    documented = set().union(*(fields for p in PROFILES.values() for fields in p.documented.values()))
    ours = set(CompletionRequest.model_fields) | set(ChatRequest.model_fields)
    assert ours - documented == set()
