"""Choosing a provider: a missing key is one clear line, tests cannot reach a real model,
and nothing but ``open_model`` pays for importing the SDK."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from teamrt.models import BLOCK_ENV, MissingAPIKey, RealModelBlocked, UnknownModel, open_model


def test_the_test_suite_refuses_real_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-a-real-key")
    with pytest.raises(RealModelBlocked, match=BLOCK_ENV):
        open_model("claude-sonnet-5-5")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://models.example.com")
    with pytest.raises(RealModelBlocked, match=r"models\.example\.com"):
        open_model("claude-sonnet-5-5")


def test_a_local_anthropic_compatible_server_is_allowed_without_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    model = open_model("qwen3-coder")
    assert model.name == "qwen3-coder"


def test_a_missing_key_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BLOCK_ENV)
    with pytest.raises(MissingAPIKey) as caught:
        open_model("claude-sonnet-5-5")
    message = str(caught.value)
    assert "ANTHROPIC_API_KEY" in message and "--model sim" in message and "\n" not in message


def test_scripted_is_not_a_model_name() -> None:
    with pytest.raises(UnknownModel):
        open_model("scripted")


def test_importing_teamrt_models_does_not_import_the_sdk() -> None:
    code = (
        "import sys, teamrt.models, teamrt.sim, teamrt.cli\n"
        "print(sorted(m for m in ('anthropic', 'httpx2') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"imported at start-up: {result.stdout.strip()}"


def test_the_guard_sits_in_the_provider_itself() -> None:
    """Building the provider directly, around ``open_model``, is refused just the same."""
    from teamrt.models.anthropic_api import AnthropicModel

    with pytest.raises(RealModelBlocked):
        AnthropicModel("claude-sonnet-5-5", api_key="sk-ant-not-a-real-key")
