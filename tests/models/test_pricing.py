"""Costs from usage, the catalog's lookup rules, and price overrides from the settings file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from teamrt.cli import main
from teamrt.models import SOURCE_DATE, Price, Usage, cost_for, lookup, price_table
from teamrt.models.pricing import settings_prices
from teamrt.settings import SettingsError, load_settings


def test_cost_of_a_known_usage_equals_the_hand_computed_figure() -> None:
    usage = Usage(
        input_tokens=1_200,
        output_tokens=850,
        cache_creation_input_tokens=30_000,
        cache_read_input_tokens=250_000,
        cache_write_5m=20_000,
        cache_write_1h=10_000,
    )
    # claude-opus-4-1: $15 in, $75 out, $18.75 5m write, $30 1h write, $1.50 read, per million tokens
    by_hand = (1_200 * 15 + 850 * 75 + 20_000 * 18.75 + 10_000 * 30 + 250_000 * 1.50) / 1_000_000
    assert by_hand == pytest.approx(1.13175)
    assert cost_for("claude-opus-4-1-20250805", usage) == pytest.approx(by_hand, abs=1e-12)


def test_unsplit_cache_writes_are_billed_at_the_5_minute_rate() -> None:
    usage = Usage(input_tokens=0, output_tokens=0, cache_creation_input_tokens=1_000_000)
    assert cost_for("claude-sonnet-4-6", usage) == pytest.approx(3.75)


def test_long_prompts_use_the_long_context_tier() -> None:
    short = Usage(input_tokens=200_000, output_tokens=1_000)
    long = Usage(input_tokens=200_001, output_tokens=1_000)
    assert cost_for("claude-sonnet-4-5", short) == pytest.approx((200_000 * 3 + 1_000 * 15) / 1e6)
    assert cost_for("claude-sonnet-4-5", long) == pytest.approx((200_001 * 6 + 1_000 * 22.5) / 1e6)


@pytest.mark.parametrize(
    ("model", "input_price", "min_cache"),
    [
        ("claude-opus-4-1-20250805", 15, 1024),
        ("claude-opus-4-0", 15, 1024),
        ("claude-opus-4-5-20251101", 5, 4096),
        ("claude-opus-5-5", 4, 512),
        ("claude-sonnet-4-5-20250929", 3, 1024),
        ("claude-3-5-haiku-20241022", 0.8, 2048),
        ("sim", 2, 512),  # Sonnet 5.5's minimum (its what's-new page)
        ("sim:claude-haiku-4-5", 1, 4096),
    ],
)
def test_lookup_takes_the_longest_matching_entry(model: str, input_price: float, min_cache: int) -> None:
    info = lookup(model)
    assert info is not None and info.price.input == input_price and info.min_cache_tokens == min_cache


def test_unknown_models_have_no_price() -> None:
    assert lookup("qwen3-coder") is None
    assert lookup("claude-opus-4-10") is None, "another version, not Opus 4 with a suffix"
    assert cost_for("qwen3-coder", Usage(input_tokens=10)) is None


def test_settings_override_and_extend_prices(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(
        '[model]\nstall_seconds = 30\n\n[prices."qwen3-coder"]\n'
        "input = 0.5\noutput = 1\ncache_write_5m = 0\ncache_write_1h = 0\ncache_read = 0\n\n"
        '[prices."claude-sonnet-4-5"]\n'
        "input = 1\noutput = 1\ncache_write_5m = 1\ncache_write_1h = 1\ncache_read = 1\n"
    )
    settings = load_settings(path)
    assert settings.model.stall_seconds == 30 and settings.model.stream_retries == 3
    table = price_table(settings)
    assert cost_for(
        "qwen3-coder", Usage(input_tokens=2_000_000, output_tokens=1_000_000), table
    ) == pytest.approx(2.0)
    assert cost_for("claude-sonnet-4-5", Usage(input_tokens=300_000), table) == pytest.approx(0.3), (
        "no long tier"
    )
    assert settings_prices(settings)["qwen3-coder"].price == Price(0.5, 1, 0, 0, 0)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[model\n", "settings file"),
        ("[model]\nstall_secs = 3\n", "no setting 'stall_secs'"),
        ("[model]\nstall_seconds = 'long'\n", "must be a number"),
        ('[prices."x"]\ninput = 1\n', "lacks"),
        ("[colours]\n", "unknown section"),
        ('[prices."claude-opus-5"]\nmax_output_tokens = 0\n', "max_output_tokens must be a whole number"),
        ('[prices."claude-opus-5"]\nwindow = 5\n', "has no setting 'window'"),
        ('[prices."claude-opus-5".long_context]\ninput = 1\n', "lacks 'above_tokens'"),
    ],
)
def test_a_bad_settings_file_is_one_clear_error(tmp_path: Path, text: str, complaint: str) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(text)
    with pytest.raises(SettingsError, match=complaint) as caught:
        settings_prices(load_settings(path))
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_settings_file_means_defaults(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "absent.toml").prices == {}


def test_teamrt_models_lists_prices_with_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(
        '[prices."local-llm"]\n'
        "input = 0\noutput = 0\ncache_write_5m = 0\ncache_write_1h = 0\ncache_read = 0\n"
    )
    monkeypatch.setenv("TEAMRT_SETTINGS", str(path))
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"^claude-opus-4-1\s+15\s+75\s+18\.75\s+30\s+1\.5\s+1024\s+32,000\s+200,000$", out, re.MULTILINE
    )
    assert re.search(r"^local-llm\s+0\s+0\s+0\s+0\s+0\s+1024\s+64,000\s+200,000 \*$", out, re.MULTILINE)
    assert f"as read on {SOURCE_DATE}" in out and f"* local-llm: settings file {path}" in out
    assert "estimate at these prices" in out


def test_teamrt_models_with_a_bad_settings_file_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "settings.toml"
    path.write_text("[model]\nstall_seconds = -1\n")
    monkeypatch.setenv("TEAMRT_SETTINGS", str(path))
    assert main(["models"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "stall_seconds must be a number of 0 or more" in err


def test_an_override_may_change_any_field_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(
        '[prices."claude-haiku-5-5"]\nmax_output_tokens = 1000\nsource = "our invoice"\n\n'
        '[prices."claude-sonnet-5-5"]\ncache_read = 0.1\n'
    )
    table = price_table(load_settings(path))
    haiku = table["claude-haiku-5-5"]
    assert (haiku.max_output_tokens, haiku.source, haiku.long_context_from) == (1000, "our invoice", 100_000)
    sonnet = table["claude-sonnet-5-5"]
    assert (sonnet.price.cache_read, sonnet.price.input, sonnet.context_window) == (0.1, 2, 1_000_000)
    assert sonnet.source == f"settings file {path}"
