"""A published MCP server from PyPI, ``mcp-server-time``, started from a project's ``.mcp.json`` through a
real team run on the simulator."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from teamrt.claudecode.paths import claude_home
from teamrt.mcp.servers import STARTED
from teamrt.models import Reply
from teamrt.sim import SimRequest, SimServer
from teamrt.store import open_reader
from tests.helpers.teams import supervise

TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))


def test_mcp_server_time_from_mcp_json_answers_a_team_run_on_sim(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    entry = {"command": TIME_SERVER, "args": ["--local-timezone", "${MCP_TZ:-UTC}"]}
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"time": entry}}))
    (project / "team.toml").write_text(
        '[team]\nname = "t"\nmodel = "sim"\n[permissions]\nallow = ["mcp__time"]\n'
        '[mcp]\nenv = ["MCP_TZ"]\n'  # the person lets the repository's entries read this variable
    )
    claude_home().mkdir(parents=True)  # the person enables the repository's server in their own settings
    (claude_home() / "settings.json").write_text(json.dumps({"enabledMcpjsonServers": ["time"]}))
    seen: list[SimRequest] = []

    def lead(request: SimRequest) -> Reply:
        seen.append(request)
        if request.turns == 0:
            return Reply().call("mcp__time__get_current_time", {"timezone": "Europe/Paris"})
        return Reply().say(request.tool_outcomes[0].output)

    run_dir = tmp_path / "run"
    with SimServer({"lead": lead}) as sim:
        outcome = supervise(project, sim, run_dir)
    assert outcome.status == "done", outcome
    assert "mcp__time__get_current_time" in seen[0].tool_names
    [said] = seen[1].tool_outcomes
    assert not said.is_error and json.loads(said.output)["timezone"] == "Europe/Paris"
    reader = open_reader(run_dir, "r1")
    try:
        [started] = [e.data for e in reader.events(kinds=(STARTED,))]
    finally:
        reader.close()
    assert started["server"] == "time" and started["tools"] == 2
