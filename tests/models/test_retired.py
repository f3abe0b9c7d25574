"""A model the API has retired: a run on it is refused in one line naming the date and the newest model of
its family (before any call, as the API would answer 404 only after the key), while the catalog still
prices the runs that used it; continuing an old run on it is refused the same way, not with a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrt.models import Usage, cost_usd, lookup, open_model
from teamrt.models.catalog import successor
from teamrt.models.errors import RetiredModel
from tests.helpers.cli import cli


@pytest.mark.parametrize(
    ("name", "retired", "instead"),
    [
        ("claude-opus-4-1", "2026-08-05", "claude-opus-5-5"),
        ("claude-opus-4-1-20250805", "2026-08-05", "claude-opus-5-5"),
        ("claude-sonnet-4-0", "2026-06-15", "claude-sonnet-5-5"),
        ("claude-3-7-sonnet-20250219", "2026-02-19", "claude-sonnet-5-5"),
        ("claude-3-haiku", "2026-04-20", "claude-haiku-5-5"),
        ("sim:claude-3-5-haiku", "2026-02-19", "sim:claude-haiku-5-5"),
    ],
)
def test_a_retired_model_is_refused_in_one_line_naming_the_date_and_the_newest_of_its_family(
    monkeypatch: pytest.MonkeyPatch, name: str, retired: str, instead: str
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-a-real-key")
    with pytest.raises(RetiredModel) as caught:
        open_model(name)
    line = str(caught.value)
    assert "\n" not in line and f"{name} was retired on {retired}" in line
    assert f"use {instead}, the newest" in line
    assert ("retired = false" in line) != name.startswith("sim:"), "only a real server may still serve it"


def test_lookup_still_prices_a_retired_models_runs() -> None:
    info = lookup("claude-opus-4-1-20250805")
    assert info is not None and info.retired == "2026-08-05"
    usage = Usage(input_tokens=1_000_000, output_tokens=0)
    assert cost_usd(usage, info) == pytest.approx(15.0), "an old run is priced as it was billed"


def test_the_successor_is_the_newest_of_the_family_that_is_not_retired() -> None:
    assert successor("claude-3-7-sonnet") == "claude-sonnet-5-5"
    assert successor("claude-opus-4") == "claude-opus-5-5"
    assert successor("claude-fable-5") == "claude-fable-5-2"
    assert successor("gpt-4o") is None


def test_retired_false_in_the_settings_allows_it_for_a_server_that_still_serves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text('[prices."claude-opus-4-1"]\nretired = false\n')
    monkeypatch.setenv("TEAMRT_SETTINGS", str(settings))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # a local server; nothing is sent
    assert open_model("claude-opus-4-1").name == "claude-opus-4-1"


def test_teamrt_run_on_a_retired_model_is_one_line_and_a_non_zero_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / ".teamrt"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-a-real-key")
    code, out, err = cli(capsys, "run", "--prompt", "x", "--model", "claude-opus-4-1")
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert "claude-opus-4-1 was retired on 2026-08-05" in err and "use claude-opus-5-5" in err
    assert "Traceback" not in err
    runs = tmp_path / ".teamrt" / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "no run is started"


def test_continuing_a_run_whose_model_has_since_retired_is_the_same_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run is made on sim as Opus 4.5; then the settings mark Opus 4.5 retired, as a catalog update
    would: going on with the run opens its model again and meets the same refusal."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / ".teamrt"))
    first = cli(
        capsys, "run", "--agent", "lead", "--model", "sim:claude-opus-4-5", "--prompt", "one", "--quiet"
    )
    assert first[0] == 0, first[2]
    [run_dir] = (tmp_path / ".teamrt" / "runs").iterdir()
    settings = tmp_path / "settings.toml"
    settings.write_text('[prices."claude-opus-4-5"]\nretired = "2026-11-24"\n')
    monkeypatch.setenv("TEAMRT_SETTINGS", str(settings))
    code, out, err = cli(capsys, "continue", run_dir.name, "--prompt", "two")
    assert code == 1 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert "sim:claude-opus-4-5 was retired on 2026-11-24" in err and "use sim:claude-opus-5-5" in err
