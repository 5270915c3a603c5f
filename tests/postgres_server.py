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
import subprocess
import tempfile
import time
from pathlib import Path

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


def _run_as() -> list[str]:
    """The command prefix that runs a PostgreSQL binary as a user it accepts."""
    if os.geteuid() != 0:
        return []
    for user in ("postgres", "nobody"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        runuser = shutil.which("runuser")
        if runuser is not None:
            return [runuser, "-u", user, "--"]
    _missing("running as root, and neither runuser nor a postgres/nobody user is available")
    return []  # unreachable


class PostgresServer:
    def __init__(self) -> None:
        initdb, postgres = _binary("initdb"), _binary("postgres")
        if initdb is None or postgres is None:
            _missing("PostgreSQL is not installed (apt-get install postgresql)")
        assert initdb is not None
        assert postgres is not None
        self.initdb, self.postgres = initdb, postgres
        self.prefix = _run_as()
        self.folder = Path(tempfile.mkdtemp(prefix="interlock-pg-"))  # not under root's 0700 tmp
        self.data = self.folder / "data"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._dbs = 0

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{db}"

    def start(self) -> PostgresServer:
        if self.prefix:
            user = self.prefix[2]
            entry = pwd.getpwnam(user)
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        subprocess.run(
            [*self.prefix, self.initdb, "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.proc = subprocess.Popen(
            [
                *self.prefix,
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
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
        shutil.rmtree(self.folder, ignore_errors=True)
