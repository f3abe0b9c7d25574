"""The shipped catalog: it loads, every model has every figure and feature, and prices are data
(``teamrt show RUN --prices FILE`` recomputes a finished run's cost)."""

from __future__ import annotations

import asyncio
import logging
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from teamrt.models import CATALOG, SOURCE_DATE, ModelInfo, ModelRequest, Price, Reply, ScriptedModel, lookup
from teamrt.models.catalog import CATALOG_FILE, FEATURE_FIELDS, LIMIT_FIELDS, PRICE_FIELDS
from teamrt.models.params import request_params
from teamrt.sim import SimServer
from tests.cli.test_runs import finished_run
from tests.helpers.cli import cli
from tests.helpers.teams import complete
from tests.runtime.test_loop import Rig, rig  # noqa: F401  (rig: the fixture)


def test_the_file_loads_and_every_model_has_every_field() -> None:
    raw = tomllib.loads(resources.files("teamrt.models").joinpath(CATALOG_FILE).read_text())
    assert raw["version"] >= 2 and raw["source_date"] == SOURCE_DATE and raw["source"]
    assert set(raw["models"]) == set(CATALOG)
    for name, entry in raw["models"].items():
        features = {f for f in FEATURE_FIELDS if f != "retired"}  # retired: only where the API retired it
        missing = {*PRICE_FIELDS, *LIMIT_FIELDS, "sampling", "source", *features} - set(entry)
        assert not missing, f"{name} lacks {sorted(missing)}"
        info = CATALOG[name]
        assert info.max_output_tokens <= info.context_window and info.source


def test_the_bands_and_limits_the_issue_names() -> None:
    haiku, sonnet_45 = lookup("claude-haiku-5-5"), lookup("claude-sonnet-4-5")
    assert haiku is not None and haiku.long_context_from == 100_000 and haiku.max_output_tokens == 128_000
    assert sonnet_45 is not None and sonnet_45.long_context_from == 200_000
    assert lookup("claude-3-haiku") is not None and CATALOG["claude-3-haiku"].max_output_tokens == 4096
    for name in ("claude-sonnet-5", "claude-sonnet-5-5"):  # 128K, not the 64K of the earlier catalog
        info = lookup(name)
        assert info is not None and info.max_output_tokens == 128_000, name
    for name in ("claude-fable-5-2", "claude-mythos-5-2"):  # the API knows them: no longer a 404 here
        info = lookup(name)
        assert info is not None and (info.price.input, info.price.output) == (8, 40), name
        assert (info.context_window, info.max_output_tokens, info.sampling) == (1_000_000, 128_000, False)


def test_temperature_goes_only_to_models_that_take_it_and_never_as_a_create_argument() -> None:
    def params(model: str) -> dict[str, object]:
        return request_params(ModelRequest(model=model, messages=[], max_tokens=10, temperature=0.2))

    assert "temperature" not in params("claude-haiku-4-5"), "messages.create() has no temperature in 2.13"
    assert params("claude-haiku-4-5")["extra_body"] == {"temperature": 0.2}
    assert "extra_body" not in params("claude-sonnet-5-5"), "Sonnet 5.x refuses a non-default temperature"
    assert params("qwen3-coder")["extra_body"] == {"temperature": 0.2}, "an unknown model is assumed to"


@pytest.mark.parametrize("model", ["sim:claude-haiku-4-5", "sim:claude-sonnet-5-5"])
def test_a_temperature_passes_through_the_installed_sdk(sim: SimServer, model: str) -> None:
    request = ModelRequest(
        model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4000, temperature=0.2
    )  # room for Sonnet 5.5's thinking, on by default
    assert complete(sim, request).stop_reason == "end_turn"


def test_the_loop_never_asks_for_more_than_the_models_output_limit(
    rig: Rig,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedModel([Reply().say("done")])
    info = ModelInfo(Price(0, 0, 0, 0, 0), 1024, max_output_tokens=600)  # the rig asks for 1000
    with caplog.at_level(logging.WARNING, logger="teamrt.runtime.loop"):
        asyncio.run(rig.loop(model, [], info=info).run("go"))
    assert [r.max_tokens for r in model.requests] == [600]
    assert len(caplog.records) == 1 and "max_tokens 1000 is above" in caplog.text


def test_show_recomputes_a_finished_runs_cost_at_other_prices(
    runs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    finished_run(runs, "r-priced")  # the lead's one call: 100 in, 50 out, 300 read from cache, on sim
    prices = tmp_path / "prices.toml"
    prices.write_text('[prices."claude-sonnet-5-5"]\ninput = 100\noutput = 100\ncache_read = 100\n')
    code, out, err = cli(capsys, "show", "r-priced")
    assert (
        code == 0
        and f"costs are estimates at the prices of {SOURCE_DATE}" in out
        and "prices.toml" not in out
    )
    code, out, err = cli(capsys, "show", "r-priced", "--prices", str(prices))
    assert code == 0, err
    assert f"$0.0450 at the prices of {prices}" in out, "(100 + 50 + 300) tokens at $100 per million"


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[prices\n", "prices file"),
        ('[prices."claude-opus-5"]\ninput = "cheap"\n', "input must be a number"),
        ('[model]\ndefault = "x"\n', "unknown section 'model'"),
        ('[prices."local"]\ninput = 1\n', "lacks 'output'"),
    ],
)
def test_a_bad_prices_file_is_one_clear_line(
    runs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    complaint: str,
) -> None:
    finished_run(runs, "r-bad")
    prices = tmp_path / "prices.toml"
    prices.write_text(text)
    code, _, err = cli(capsys, "show", "r-bad", "--prices", str(prices))
    assert code == 1 and err.count("\n") == 1 and complaint in err and str(prices) in err
