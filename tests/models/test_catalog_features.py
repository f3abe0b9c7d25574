"""What each model takes, as the catalog says (``thinking_default``, ``binds_thinking``, ``context_editing``,
``server_compaction``, ``effort``, ``forced_tool_choice``, ``system_messages``, ``retired``): every shipped
model gives every feature, the facts the API's pages state hold, a settings file may set any of them, a bad
value is one clear line, and ``teamrt models`` shows them within 80 columns."""

from __future__ import annotations

import json
import re
import tomllib
from datetime import date
from importlib import resources
from pathlib import Path

import pytest

from teamrt.errors import UserError
from teamrt.models import CATALOG, SOURCE_DATE, lookup, price_table
from teamrt.models.catalog import CATALOG_FILE, EFFORT_LEVELS, FEATURE_FIELDS, ModelInfo
from teamrt.settings import load_settings, settings_path
from tests.helpers.cli import cli

ALL_LEVELS = EFFORT_LEVELS


def shipped() -> dict[str, dict[str, object]]:
    text = resources.files("teamrt.models").joinpath(CATALOG_FILE).read_text()
    models: dict[str, dict[str, object]] = tomllib.loads(text)["models"]
    return models


def named(predicate: str) -> set[str]:
    """The catalog's models whose ``predicate`` feature is true (retired ones left out)."""
    return {name for name, info in CATALOG.items() if info.retired is None and getattr(info, predicate)}


def test_every_shipped_model_gives_every_feature_and_retired_only_where_retired() -> None:
    for name, entry in shipped().items():
        missing = {f for f in FEATURE_FIELDS if f != "retired"} - set(entry)
        assert not missing, f"{name} lacks {sorted(missing)}"
        assert entry["thinking_default"] in ("adaptive", "none"), name
        if "retired" in entry:
            retired = date.fromisoformat(str(entry["retired"]))
            assert retired <= date.fromisoformat(SOURCE_DATE), f"{name} retires later: not yet retired"
        info = CATALOG[name]
        assert list(info.effort) == [level for level in ALL_LEVELS if level in info.effort], "lowest first"
        assert not info.binds_thinking or info.thinking_default == "adaptive", (
            f"{name} binds what it never thinks"
        )


def test_the_retired_models_are_the_ones_the_deprecations_page_lists() -> None:
    retired = {name: info.retired for name, info in CATALOG.items() if info.retired is not None}
    assert retired == {
        "claude-opus-4-1": "2026-08-05",
        "claude-opus-4": "2026-06-15",
        "claude-sonnet-4": "2026-06-15",
        "claude-3-7-sonnet": "2026-02-19",
        "claude-3-5-haiku": "2026-02-19",
        "claude-3-haiku": "2026-04-20",
    }
    assert CATALOG["claude-sonnet-4-5"].retired is None, "deprecated, retiring 2026-11-30: still served"
    assert "2026-11-30" in CATALOG["claude-sonnet-4-5"].source


def test_the_facts_the_api_pages_state() -> None:
    # build-with-claude/thinking: these refuse forced tool use on every request (and their 5.2 twins)
    no_forcing = {"claude-opus-5-5", "claude-sonnet-5-5", "claude-fable-5-1", "claude-mythos-5-1"}
    assert {n for n, i in CATALOG.items() if not i.forced_tool_choice} == no_forcing | {
        "claude-fable-5-2",
        "claude-mythos-5-2",
    }
    assert CATALOG["claude-haiku-5-5"].forced_tool_choice, "its migration guide: forced tool_choice accepted"
    # preserved-thinking: the prefix check runs on these; Mythos 5.1 and earlier models do not run it
    assert named("binds_thinking") == {
        "claude-fable-5-1", "claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5",
        "claude-fable-5-2", "claude-mythos-5-2",
    }  # fmt: skip
    # Sonnet 5.5 and Haiku 5.5 think by default (the point 1); Opus 4.8 does not
    assert CATALOG["claude-sonnet-5-5"].thinking_default == CATALOG["claude-haiku-5-5"].thinking_default
    assert CATALOG["claude-sonnet-5-5"].thinking_default == "adaptive"
    assert CATALOG["claude-opus-4-8"].thinking_default is None
    # mid-conversation system messages: not on Sonnet 5, on Sonnet 5.5 (its what's-new page)
    assert not CATALOG["claude-sonnet-5"].system_messages and CATALOG["claude-sonnet-5-5"].system_messages
    # compaction: Sonnet 5.5 on demand only (its what's-new page), Haiku 5.5 on demand only (the
    # compaction-background page's list); Opus 5.5 both
    for model in ("claude-sonnet-5-5", "claude-haiku-5-5"):
        assert CATALOG[model].compaction_on_demand and not CATALOG[model].server_compaction
    assert CATALOG["claude-opus-5-5"].compaction_on_demand and CATALOG["claude-opus-5-5"].server_compaction
    # effort: xhigh on Opus 4.7 and later, max without xhigh on Opus 4.6 and Sonnet 4.6, none on Haiku 4.5
    assert CATALOG["claude-opus-4-6"].effort == ("low", "medium", "high", "max")
    assert CATALOG["claude-opus-4-5"].effort == ("low", "medium", "high")
    assert CATALOG["claude-haiku-4-5"].effort == () and CATALOG["claude-opus-4-7"].effort == ALL_LEVELS
    # the cache minimums the 5.5 what's-new pages give
    assert CATALOG["claude-sonnet-5-5"].min_cache_tokens == CATALOG["claude-opus-5-5"].min_cache_tokens == 512
    assert CATALOG["claude-sonnet-5"].min_cache_tokens == 1024
    assert not CATALOG["claude-haiku-5-5"].sampling, "its what's-new page: non-default sampling is a 400"


def prices_from(tmp_path: Path, text: str) -> dict[str, ModelInfo]:
    path = tmp_path / "settings.toml"
    path.write_text(text)
    return price_table(load_settings(path))


def test_a_settings_file_may_set_every_feature_and_keeps_the_rest(tmp_path: Path) -> None:
    table = prices_from(
        tmp_path,
        '[prices."claude-haiku-5-5"]\neffort = ["max", "low"]\nthinking_default = "none"\n'
        "binds_thinking = false\nsystem_messages = true\n\n"
        '[prices."claude-opus-4-1"]\nretired = false\n\n'
        '[prices."claude-sonnet-4-5"]\nretired = 2026-11-30\nforced_tool_choice = false\n\n'
        '[prices."local-llm"]\ninput = 0\noutput = 0\ncache_write_5m = 0\ncache_write_1h = 0\n'
        "cache_read = 0\ncontext_editing = true\nserver_compaction = true\neffort = []\n",
    )
    haiku = table["claude-haiku-5-5"]
    assert (haiku.effort, haiku.thinking_default, haiku.binds_thinking, haiku.system_messages) == (
        ("low", "max"), None, False, True,
    )  # fmt: skip
    assert haiku.context_editing and haiku.price.input == 0.1, "the rest stay built-in"
    assert table["claude-opus-4-1"].retired is None, "false allows a retired model again"
    sonnet = table["claude-sonnet-4-5"]
    assert (sonnet.retired, sonnet.forced_tool_choice) == ("2026-11-30", False), "a TOML date is taken"
    local = table["local-llm"]
    assert (local.context_editing, local.server_compaction, local.effort) == (True, True, ())
    assert (local.thinking_default, local.forced_tool_choice, local.retired) == (None, True, None)
    assert lookup("claude-opus-4-1") is not None and CATALOG["claude-opus-4-1"].retired == "2026-08-05"


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("setting", "complaint"),
    [
        ('effort = "low"', "effort must be a list of levels (low, medium, high, xhigh, max)"),
        ('effort = ["ultra"]', "effort has no level 'ultra'"),
        ('effort = ["low", "low"]', "effort names a level twice"),
        ("effort = [1]", "effort must be a list of levels"),
        ('thinking_default = "enabled"', 'thinking_default must be "adaptive" or "none"'),
        ("thinking_default = true", 'thinking_default must be "adaptive" or "none"'),
        ('retired = "yesterday"', 'retired must be a date such as "2026-08-05", or false'),
        ('retired = "2026-13-01"', "retired must be a date"),
        ("retired = true", "retired must be a date"),
        ('retired = "2026-08-05\\n[prices.x]"', "retired must be a date"),
        ('binds_thinking = "yes"', "binds_thinking must be true or false"),
        ("context_editing = 1", "context_editing must be true or false"),
        ("server_compaction = []", "server_compaction must be true or false"),
        ('system_messages = "\\u001b[2J"', "system_messages must be true or false"),
        ("forced_tool_choice = {}", "forced_tool_choice must be true or false"),
    ],
)
def test_a_bad_feature_in_a_settings_file_is_one_clear_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    setting: str,
    complaint: str,
) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(f'[prices."claude-sonnet-5-5"]\n{setting}\n')
    with pytest.raises(UserError, match=re.escape(complaint)):
        price_table(load_settings(path))
    monkeypatch.setenv("TEAMRT_SETTINGS", str(path))
    code, out, err = cli(capsys, "models")
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert complaint in err and "claude-sonnet-5-5" in err and "Traceback" not in err
    assert "\x1b" not in err


def test_teamrt_models_shows_the_features_within_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "models")
    assert code == 0 and err == ""
    path = str(settings_path())
    assert f"\n  {path}\n" in out, "the settings file's path on a line of its own, never broken"
    assert max(len(line) for line in out.splitlines() if line != f"  {path}") <= 80
    head = re.search(
        r"^model\s+thinks\s+binds\s+edits\s+thresh\s+demand\s+forced\s+system\s+effort$", out, re.M
    )
    assert head is not None, out
    rows = {
        line.split()[0]: line.split()[1:] for line in out[head.end() :].strip().split("\n\n")[0].splitlines()
    }
    assert rows["claude-sonnet-5-5"] == ["yes", "yes", "yes", "-", "yes", "-", "yes", "low-max"]
    assert rows["claude-haiku-5-5"] == ["yes", "yes", "yes", "-", "yes", "yes", "-", "low-max"]
    assert rows["claude-opus-4-6"][-1] == "low-high,max" and rows["claude-haiku-4-5"][-1] == "-"
    assert rows["claude-opus-4-1"] == ["retired", "2026-08-05;", "use", "claude-opus-5-5"]
    assert rows["claude-3-7-sonnet"] == ["retired", "2026-02-19;", "use", "claude-sonnet-5-5"]
    assert set(rows) == set(CATALOG), "every model has a features row"
    assert re.search(r"^claude-fable-5-2\s+8\s+40\s+10\s+16\s+0\.2\s+512\s+128,000\s+1,000,000$", out, re.M)


def test_teamrt_models_json_gives_every_feature(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "models", "--json")
    assert code == 0 and err == ""
    table = {m["model"]: m for m in json.loads(out)}
    opus = table["claude-opus-4-1"]
    assert (opus["retired"], opus["use_instead"], opus["effort"]) == ("2026-08-05", "claude-opus-5-5", [])
    sonnet = table["claude-sonnet-5-5"]
    assert {k: sonnet[k] for k in (*FEATURE_FIELDS, "use_instead")} == {
        "thinking_default": "adaptive", "thinking_off": "between_tools", "binds_thinking": True,
        "context_editing": True,
        "server_compaction": False, "compaction_on_demand": True, "effort": list(ALL_LEVELS),
        "forced_tool_choice": False, "system_messages": True, "retired": None, "use_instead": None,
    }  # fmt: skip
    assert sonnet["max_output_tokens"] == 128_000 and "whats-new" in sonnet["source"]
