"""A throw-away PostgreSQL server for the tests and benchmarks, from the machine's own binaries.

    server = PostgresServer.start(directory)   # initdb + pg_ctl start on a free port (127.0.0.1 only)
    server.url("dbname")                       # postgresql://eventckpt@127.0.0.1:PORT/dbname
    server.stop(mode="immediate")              # a crash, as the fault tests need; server.restart()
    server.destroy()

Debian's `postgresql` package puts the binaries in /usr/lib/postgresql/<major>/bin (not on PATH); the
newest major is used, else whatever is on PATH. `initdb` refuses to run as root, so as root the cluster
is created and run as the `postgres` user the package creates (or `nobody`). Nothing is downloaded.
"""

from __future__ import annotations

import glob
import os
import pwd
import random
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

USER = "eventckpt"  # the superuser of the throw-away cluster


def binaries() -> Path | None:
    """The directory holding initdb and pg_ctl, or None when this machine has no PostgreSQL server."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb and shutil.which("pg_ctl") else None


def _free_port() -> int:
    """A port free now, below the kernel's range for outgoing connections (32768 and up on Linux): a server
    restarted on its port must not find it taken by a client connection's local end meanwhile, as a port
    from bind(0), which lies in that range, could be."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port between 20000 and 32000")


def _run_as() -> list[str]:
    """The command prefix that runs a server binary as an unprivileged user when we are root."""
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return ["runuser", "-u", name, "--"]
    raise RuntimeError("running as root and no unprivileged user (postgres, nobody) to run PostgreSQL as")


def _owner() -> tuple[int, int] | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid
    return None


@dataclass
class PostgresServer:
    directory: Path
    port: int
    bin: Path
    settings: tuple[str, ...]

    @classmethod
    def start(cls, directory: Path, *, durable: bool = False) -> PostgresServer:
        """Create a cluster in `directory` and start it. `durable=False` (tests) turns fsync off: a crash
        of the server (pg_ctl stop -m immediate) still recovers everything from the operating system's
        page cache; only a power cut could lose data. Benchmarks pass durable=True (the server defaults)."""
        bin_dir = binaries()
        if bin_dir is None:
            raise FileNotFoundError("no PostgreSQL server binaries (Debian: apt-get install postgresql)")
        directory.mkdir(parents=True, exist_ok=True)
        owner = _owner()
        if owner is not None:
            os.chown(directory, *owner)
        data = directory / "data"
        done = subprocess.run([*_run_as(), str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "--auth=trust",
                               "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"initdb failed in {directory}: {done.stderr.strip() or done.stdout.strip()}")
        settings = ["-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={directory}",
                    "-c", "max_connections=200", "-c", "shared_buffers=128MB"]
        if not durable:
            settings += ["-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=on"]
        server = cls(directory, _free_port(), bin_dir, tuple(settings))
        server.run()
        return server

    def _ctl(self, *args: str) -> None:
        done = subprocess.run([*_run_as(), str(self.bin / "pg_ctl"), "-D", str(self.directory / "data"), *args],
                              capture_output=True, text=True)
        if done.returncode:
            log = self.directory / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"pg_ctl {args[0]} failed: {done.stderr.strip() or done.stdout.strip()}\n{tail}")

    def run(self) -> None:
        """Start the (stopped) server and wait until it accepts connections."""
        options = " ".join([f"-p {self.port}", *(f"{a} {b}" for a, b in zip(self.settings[::2], self.settings[1::2]))])
        self._ctl("start", "-w", "-t", "60", "-l", str(self.directory / "server.log"), "-o", options)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: "fast" (clean), or "immediate" (a crash: no checkpoint, recovery on restart)."""
        self._ctl("stop", "-m", mode, "-w")

    def restart(self) -> None:
        self.run()

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{dbname}"

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        """Run SQL with the machine's psql (the README's examples are tested this way)."""
        out = subprocess.run([str(self.bin / "psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", self.url(dbname),
                              "-c", sql], check=True, capture_output=True, text=True)
        return out.stdout

    def destroy(self) -> None:
        try:
            self.stop("immediate")
        except RuntimeError:
            pass
        shutil.rmtree(self.directory, ignore_errors=True)


def wait_until_down(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return
        time.sleep(0.05)
