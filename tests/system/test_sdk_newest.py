"""The newest anthropic SDK of the allowed major version, not only the one this environment pins.

A scratch virtual environment gets ``anthropic`` (and its own dependencies) from the package index at
the newest version ``pyproject.toml`` allows, and teamrt itself with no dependencies; teamrt's other
dependencies come from the environment running the tests, by a ``.pth`` file read after the scratch
environment's own packages. One streamed tool call and its result then go through that SDK to the
simulator, in a subprocess. Without the package index the test fails in CI and is skipped elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

CHECKOUT = Path(__file__).resolve().parents[2]

ROUND_TRIP = """
import asyncio, anthropic
from teamrt.models import ModelRequest, open_model
from teamrt.models.reply import Reply
from teamrt.sim import SimServer

TOOL = {"name": "read", "description": "read a file", "input_schema": {"type": "object"}}

def reader(request):
    if not request.tool_outcomes:
        return Reply().call("read", {"path": "notes.txt"})
    return Reply().say("notes.txt says " + request.tool_outcomes[0].output)

def ask(messages):
    return ModelRequest(model="sim", messages=messages, max_tokens=1024, system="You read files.",
                        tools=[TOOL], role="worker")

async def main(sim):
    model = open_model("sim", sim=sim)
    try:
        messages = [{"role": "user", "content": "What is in notes.txt?"}]
        first = await model.complete(ask(messages))
        assert first.stop_reason == "tool_use", first
        [call] = first.tool_uses
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": "buy milk"}
        messages += [{"role": "assistant", "content": first.content}, {"role": "user", "content": [result]}]
        second = await model.complete(ask(messages))
        assert second.text == "notes.txt says buy milk", second
    finally:
        await model.aclose()

with SimServer({"worker": reader}) as sim:
    asyncio.run(main(sim))
print(anthropic.__version__, anthropic.__file__)
"""


def _sdk_requirement() -> Requirement:
    dependencies = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]["dependencies"]
    [requirement] = [r for r in map(Requirement, dependencies) if r.name == "anthropic"]
    return requirement


def _unreachable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the package index cannot be reached, so the newest SDK was not tried: {reason}")
    pytest.skip(f"the package index cannot be reached (in CI this fails): {reason}")


def _run(*args: str | Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_the_newest_sdk_of_the_allowed_major_version_runs_a_streamed_tool_round_trip(tmp_path: Path) -> None:
    requirement = _sdk_requirement()
    venv = tmp_path / "venv"
    made = _run(sys.executable, "-m", "venv", "--without-pip", venv, timeout=60)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    pip = (sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check")
    probe = _run(*pip, "index", "versions", "anthropic", "--timeout", "10", timeout=60)
    if probe.returncode != 0:
        _unreachable(probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "pip index failed")
    [listed] = [line for line in probe.stdout.splitlines() if line.startswith("Available versions:")]
    allowed = list(requirement.specifier.filter(listed.partition(":")[2].replace(" ", "").split(",")))
    assert allowed, f"no version on the index satisfies {requirement}: {listed}"
    # The SDK first, on its own, so that pip (this environment's, run for the scratch one) resolves its
    # dependencies afresh rather than taking the tests' environment's (the .pth file below adds them).
    sdk = _run(*pip, "install", "--quiet", str(requirement), timeout=120)
    assert sdk.returncode == 0, sdk.stderr
    site = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", timeout=30)
    (Path(site.stdout.strip()) / "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    source = tmp_path / "teamrt-src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(CHECKOUT / name, source / name)
    shutil.copytree(CHECKOUT / "teamrt", source / "teamrt", ignore=shutil.ignore_patterns("__pycache__"))
    teamrt = _run(
        *pip, "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation", source, timeout=120
    )
    assert teamrt.returncode == 0, teamrt.stderr

    ran = subprocess.run(
        [str(python), "-c", ROUND_TRIP], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert ran.returncode == 0, f"with anthropic {max(allowed, key=Version)}:\n{ran.stderr}"
    version, module = ran.stdout.split()[-2:]
    assert Path(module).is_relative_to(venv), f"anthropic came from {module}, not the scratch environment"
    assert Version(version) == max(map(Version, allowed)), f"{version} is not the newest of {allowed}"
