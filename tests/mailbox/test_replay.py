"""Mail is read once: mail a crash left ingested but not acknowledged is acknowledged on resume, never
handed to the model again (a resend of mail already acknowledged: tests/mailbox/test_mailbox.py)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, update

from teamrt import home
from teamrt.mailbox import Mailbox
from teamrt.models import Reply, ScriptedModel
from teamrt.runtime import teamrun
from teamrt.runtime.teamrun import resume_run
from teamrt.store import IngestedMail, create_store, open_reader
from teamrt.store import tables as t
from teamrt.team import load_team, team_to_json

RUN = "20261125-000000-mail"


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_mail_ingested_before_a_crash_is_acknowledged_on_resume_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lead's turn that read a message was committed, the crash came before the message's ack: on
    resume the message moves to cur/ and the model sees it once, in the turn that read it."""
    monkeypatch.setenv(home.HOME_ENV, str(tmp_path / "home"))
    project = tmp_path / "project"
    project.mkdir()
    team_file = tmp_path / "team.toml"
    team_file.write_text("[team]\nname = 't'\nmodel = 'sim'\n")
    team = load_team(team_file, project=project)
    run_dir = home.run_dir(RUN)
    store = create_store(run_dir, RUN, task="go", workdir=str(project), settings={"team": team_to_json(team)})
    with Mailbox(run_dir / "mailbox", RUN) as mailbox:
        mailbox.register("lead")
        msg = mailbox.post(sender="user", recipient="lead", body="THE ONE MESSAGE")
    said = f'<mail id="{msg.id}" from="user" kind="message">\n{msg.body}\n</mail>'

    gone = subprocess.Popen(["true"])
    gone.wait()

    def dead_owner(conn: Connection) -> None:
        conn.execute(update(t.runs).where(t.runs.c.id == RUN).values(owner_pid=gone.pid, owner_start_time=1))

    async def build() -> None:
        await store.add_agent("lead", kind="lead", model="sim", role="lead", workspace=str(project))
        epoch = await store.begin_epoch("lead")
        content: list[dict[str, Any]] = [{"type": "text", "text": "go"}, {"type": "text", "text": said}]
        ingested = [IngestedMail(msg.id, msg.sender, msg.kind, msg.to_dict())]
        await store.append_turn("lead", epoch=epoch, role="user", content=content, ingested=ingested)
        await store.write(dead_owner)

    asyncio.run(build())
    store.close()
    assert files(run_dir / "mailbox" / "lead" / "new") == [f"{msg.id}.json"], "ingested, not acknowledged"

    model = ScriptedModel([Reply().say("read it")])
    monkeypatch.setattr(teamrun, "open_model", lambda name, **_: model)
    summary = asyncio.run(asyncio.wait_for(resume_run(RUN), 60))

    assert summary.outcome.status == "done", summary.outcome
    assert [str(r.messages).count("THE ONE MESSAGE") for r in model.requests] == [1]
    assert files(run_dir / "mailbox" / "lead" / "new") == []
    assert files(run_dir / "mailbox" / "lead" / "cur") == [f"{msg.id}.json"]
    reader = open_reader(run_dir, RUN)
    try:
        assert [m.id for m in reader.mail("lead")] == [msg.id], "ingested once"
    finally:
        reader.close()
