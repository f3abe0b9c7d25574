"""``teamrt worker``'s mistakes are one line each; the hidden ``--queued`` mode stays out of ``--help``."""

from __future__ import annotations

import pytest

from teamrt.queue import gitremote
from tests.helpers.cli import cli

UNREACHABLE = "postgresql+psycopg://nobody:secret@127.0.0.1:1/none"


@pytest.mark.parametrize(
    ("env", "args", "said"),
    [
        ({}, [], "the queue needs a PostgreSQL server database"),
        ({"TEAMRT_DB": UNREACHABLE}, ["--queue", "no such"], "queue 'no such' is not a queue name"),
        ({"TEAMRT_DB": UNREACHABLE, "TEAMRT_HOST": "a host"}, [], "TEAMRT_HOST='a host' is not a host name"),
        (
            {"TEAMRT_DB": UNREACHABLE},
            [],
            "the queue's database postgresql+psycopg://nobody:***@127.0.0.1:1/none",
        ),
    ],
)
def test_a_worker_that_cannot_work_says_why_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, env: dict[str, str], args: list[str],
    said: str,
) -> None:  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, out, err = cli(capsys, "worker", *args)
    assert (code, out) == (1, "") and err.count("\n") == 1 and said in err, err
    assert "secret" not in err


def test_the_queued_mode_is_not_shown(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("run", "resume"):
        code, out, _ = cli(capsys, command, "--help")
        assert code == 0 and "--quiet" in out and "queued" not in out


@pytest.mark.hostile
@pytest.mark.parametrize(
    "url", ["ext::sh -c id", "ext::sh", "fd::3", "-u", "--upload-pack=id", "/repo\n", "mailto://x", ""]
)
def test_urls_that_would_make_git_run_a_command_are_refused(url: str) -> None:
    with pytest.raises(gitremote.RemoteError, match="is refused"):
        gitremote.check_url(url)


@pytest.mark.hostile
@pytest.mark.parametrize("ref", ["-x", "--upload-pack=id", "a..b", "main\n", "a b", ""])
def test_refs_that_would_be_read_as_options_are_refused(ref: str) -> None:
    with pytest.raises(gitremote.RemoteError, match="is refused"):
        gitremote.check_ref(ref)


@pytest.mark.parametrize(("url", "local"), [("/srv/r.git", True), ("file:///r", True), ("r", True),
                                            ("git@host:r.git", False), ("https://h/r", False)])  # fmt: skip
def test_which_urls_run_git_on_this_machine(url: str, local: bool) -> None:
    assert gitremote.is_local(url) is local
