"""A real PostgreSQL server (initdb in a temporary folder, ``postgres`` on a free loopback port).

The binaries are found on PATH, else under /usr/lib/postgresql/*/bin (where Debian puts them). PostgreSQL
refuses to run as root: as root (CI), the cluster is created and run as the ``postgres`` user (else
``nobody``) through ``runuser``. Without the binaries the tests skip, except where
``INTERLOCK_REQUIRE_POSTGRES=1`` (set by .ci/run): there they fail.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.redis_server import free_port

SUPERUSER = "interlock"


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found is not None:
        return found
    candidates = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4] or 0)
    )
    return candidates[-1] if candidates else None


def _missing(reason: str) -> None:
    if os.environ.get("INTERLOCK_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"PostgreSQL is required here (INTERLOCK_REQUIRE_POSTGRES=1): {reason}")
    pytest.skip(reason)


def _run_as() -> pwd.struct_passwd | None:
    """The user to run PostgreSQL as: None (this one) unless this is root."""
    if os.geteuid() != 0:
        return None
    for user in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(user)
        except KeyError:
            continue
    _missing("running as root, and there is neither a postgres nor a nobody user to run PostgreSQL as")
    return None  # unreachable


class PostgresServer:
    def __init__(self) -> None:
        initdb, postgres = _binary("initdb"), _binary("postgres")
        if initdb is None or postgres is None:
            _missing("PostgreSQL is not installed (apt-get install postgresql)")
        assert initdb is not None
        assert postgres is not None
        self.initdb, self.postgres = initdb, postgres
        self.user = _run_as()
        self.folder = Path(tempfile.mkdtemp(prefix="interlock-pg-"))  # not under root's 0700 tmp
        self.data = self.folder / "data"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._dbs = 0

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{db}"

    def _as_user(self) -> dict[str, Any]:
        if self.user is None:
            return {}
        return {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}

    def start(self) -> PostgresServer:
        if self.user is not None:
            os.chown(self.folder, self.user.pw_uid, self.user.pw_gid)
        subprocess.run(
            [self.initdb, "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=self.folder,
            **self._as_user(),
        )
        return self._launch()

    def _launch(self) -> PostgresServer:
        self.proc = subprocess.Popen(
            [
                self.postgres,
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-h",
                "127.0.0.1",
                "-k",
                str(self.folder),
                "-c",
                "fsync=off",  # the tests kill the gateway, never the database
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=self.folder,
            **self._as_user(),
        )
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(self.url(), connect_timeout=2):
                    return self
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("postgres did not start") from None
                time.sleep(0.05)

    def pause(self) -> None:
        """Stop the server (fast shutdown: its clients are cut off) and keep its data and port."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(10)
        self.proc = None

    def resume(self) -> PostgresServer:
        """Start the paused server again, on the same port and data."""
        return self._launch()

    def new_database(self) -> str:
        """A fresh, empty database's URL (one per test, so tests never see each other's rows)."""
        import psycopg

        self._dbs += 1
        name = f"t{self._dbs}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown: clients are disconnected
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
        shutil.rmtree(self.folder, ignore_errors=True)
