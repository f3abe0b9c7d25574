"""A throwaway PostgreSQL server for the suite and the benchmarks.

Runs Debian's server binaries (the ``postgresql`` package): ``initdb`` into a
fresh directory, then ``postgres`` on a free loopback port, with password
authentication over TCP. PostgreSQL refuses to run as root, so under root the
server runs as the ``postgres`` user the package creates. Each test gets a
database of its own, copied from a template in milliseconds.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from teamrt.errors import TeamrtError

PASSWORD = "teamrt-test"
USER = "teamrt"
START_TIMEOUT_S = 60.0
STOP_SIGNALS = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT}
"""The signal ``pg_ctl stop -m <mode>`` sends the postmaster, by mode."""


class NoServer(TeamrtError):
    """PostgreSQL's server binaries are not installed here."""


def binaries() -> Path:
    """The directory of ``initdb`` and ``postgres``: Debian's newest, or the ones on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise NoServer("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    return Path(initdb).parent


class PgServer:
    """One server in its own directory; ``url(db)`` names a database on it for SQLAlchemy."""

    def __init__(self, *, durable: bool = False) -> None:
        """``durable``: flush commits to disk as a production server does (``fsync=on``); off by
        default, since a throwaway server's data need not survive a power cut."""
        self.bin = binaries()
        self.durable = durable
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam("postgres")
            except KeyError:
                raise NoServer(
                    "PostgreSQL will not run as root, and there is no postgres user to run it as"
                ) from None
            self._as = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        # Another user's server needs a way in: /tmp, not a $TMPDIR that may be root's alone.
        self.dir = Path(tempfile.mkdtemp(prefix="teamrt-pg-", dir="/tmp" if self._as else None))
        if self._as:
            os.chown(self.dir, self._as["user"], self._as["group"])
        self.port = _free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> PgServer:
        data = self.dir / "data"
        password_file = self.dir / "password"
        password_file.write_text(PASSWORD)
        if self._as:
            os.chown(password_file, self._as["user"], self._as["group"])
        self._run(
            self.bin / "initdb", "-D", data, "-U", USER, "--pwfile", password_file, "-A", "scram-sha-256",
            "--no-sync", "-E", "UTF8", "--locale", "C",
        )  # fmt: skip
        self.launch()
        return self

    def launch(self) -> None:
        """Start the server on the data directory ``start`` made (again, after ``halt``), as ``pg_ctl
        start`` does; returns once it accepts connections."""
        data = self.dir / "data"
        log = open(self.dir / "server.log", "ab")  # noqa: SIM115 - the server writes it for its whole life
        self._proc = subprocess.Popen(
            [
                str(self.bin / "postgres"), "-D", str(data), "-p", str(self.port), "-h", "127.0.0.1",
                "-k", str(self.dir), "-c", f"fsync={'on' if self.durable else 'off'}",
                "-c", "max_connections=300", "-c", "shared_buffers=32MB",
            ],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.dir, start_new_session=True, **self._as,
        )  # fmt: skip
        log.close()
        self._wait_ready()

    def halt(self, mode: str = "fast") -> None:
        """Stop the server as ``pg_ctl stop -m <mode>`` does (the same signal), keeping its data:
        ``immediate`` leaves it to recover from its own WAL at the next ``launch``."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(STOP_SIGNALS[mode])
            self._proc.wait(timeout=START_TIMEOUT_S)

    def restart(self, mode: str = "fast") -> None:
        """``pg_ctl restart -m <mode>``: stopped, then started on the same port and data."""
        self.halt(mode)
        self.launch()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create ``name`` (a file copy of ``template`` when given: milliseconds) and return its URL."""
        clause = f' TEMPLATE "{template}" STRATEGY FILE_COPY' if template else ""
        self._admin(f'CREATE DATABASE "{name}"{clause}')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop ``name``, ending whatever connections it still has."""
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self._dsn("postgres"), autocommit=True) as conn:
            conn.execute(statement)  # names made by the suite, not input

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PgServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _dsn(self, database: str) -> str:
        return f"host=127.0.0.1 port={self.port} user={USER} password={PASSWORD} dbname={database}"

    def _run(self, *argv: object) -> None:
        done = subprocess.run(
            [str(a) for a in argv], capture_output=True, cwd=self.dir, check=False, **self._as
        )
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stderr.decode(errors='replace').strip()}")

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(f"postgres exited: {(self.dir / 'server.log').read_text()[-2000:]}")
            try:
                psycopg.connect(self._dsn("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
