"""Shared plumbing of the benchmarks: services, machine facts, results, printing."""

from __future__ import annotations

import contextlib
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
PYTHON = sys.executable


def log(message: str) -> None:
    print(message, flush=True)


def header(title: str) -> None:
    log("")
    log(f"== {title} " + "=" * max(0, 74 - len(title)))


def row(label: str, figure: Any, reference: Any = "", note: str = "") -> None:
    """One line of a benchmark's table: figure, reference, note."""
    log(f"  {label:<38} {fmt(figure):>12}  {fmt(reference):>12}  {note}")


def table_header(figure: str = "measured", reference: str = "reference") -> None:
    log(f"  {'':<38} {figure:>12}  {reference:>12}")


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


# -- services -----------------------------------------------------------------


def services_env() -> dict[str, str]:
    """``DATABASE_URL`` and ``EID_TEST_REDIS_URL``: from the environment, or started.

    When either is missing, ``.ci/services.sh start`` brings up the throwaway
    PostgreSQL and Redis on loopback, and ``.ci/services.sh env`` names them.
    """
    if os.environ.get("DATABASE_URL") and os.environ.get("EID_TEST_REDIS_URL"):
        return {k: os.environ[k] for k in ("DATABASE_URL", "EID_TEST_REDIS_URL")}
    script = ROOT / ".ci" / "services.sh"
    if not script.exists():
        raise SystemExit(
            "benchmarks: set DATABASE_URL (PostgreSQL) and EID_TEST_REDIS_URL, "
            f"or provide {script} to start them"
        )
    log("Starting PostgreSQL and Redis on loopback (.ci/services.sh start) ...")
    subprocess.run([str(script), "start"], check=True, timeout=600)
    out = subprocess.run(
        [str(script), "env"], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    found = dict(re.findall(r"export (\w+)=(\S+)", out))
    missing = {"DATABASE_URL", "EID_TEST_REDIS_URL"} - found.keys()
    if missing:
        raise SystemExit(f"benchmarks: .ci/services.sh env did not print {sorted(missing)}")
    return {k: found[k] for k in ("DATABASE_URL", "EID_TEST_REDIS_URL")}


def with_database(url: str, name: str) -> str:
    """``url`` with its database name replaced (same server and credentials)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def with_redis_db(url: str, db: int) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{db}"))


def postgres_params(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 5432,
        "user": parts.username,
        "password": parts.password,
        "dbname": "postgres",
        "autocommit": True,
        "connect_timeout": 10,
    }


def recreate_database(url: str) -> None:
    """Drop (if present) and create the PostgreSQL database named in ``url``."""
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    assert re.fullmatch(r"[a-z0-9_]+", name), name
    with psycopg.connect(**postgres_params(url)) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    assert re.fullmatch(r"[a-z0-9_]+", name), name
    with psycopg.connect(**postgres_params(url)) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- processes ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_http(url: str, timeout: float = 60, proc: subprocess.Popen[Any] | None = None) -> None:
    import requests

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before answering {url}")
        try:
            requests.get(url, timeout=2, allow_redirects=False)
            return
        except requests.RequestException as err:
            last = err
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout} s: {last}")


@contextlib.contextmanager
def server(
    args: Sequence[str], env: dict[str, str], log_path: Path, probe: str, timeout: float = 60
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server process (its own process group) until the block ends."""
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            list(args),
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_for_http(probe, timeout, proc)
            yield proc
        finally:
            stop_process_group(proc)


def stop_process_group(proc: subprocess.Popen[Any], grace: float = 10) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def process_tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by ``pid`` and its live children.

    Read from /proc, so it is Linux-only; returns 0.0 elsewhere.
    """
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    proc = Path("/proc")
    if not proc.exists():
        return 0.0
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        p = int(entry.name)
        stats[p] = fields
        children.setdefault(int(fields[1]), []).append(p)
    todo = [pid]
    while todo:
        p = todo.pop()
        fields = stats.get(p)
        if fields is None:
            continue
        # utime, stime, cutime, cstime (fields 14-17 of stat; 12-15 after the name).
        total += sum(int(x) for x in fields[11:15])
        todo.extend(children.get(p, []))
    return total / ticks


# -- the machine ------------------------------------------------------------------


def machine() -> dict[str, Any]:
    import django
    import requests

    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "django": django.get_version(),
        "requests": requests.__version__,
        "platform": platform.platform(),
    }
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    if shutil.which("nproc"):
        info["nproc"] = int(subprocess.run(["nproc"], capture_output=True, text=True).stdout)
    if shutil.which("free"):
        info["free_h"] = subprocess.run(["free", "-h"], capture_output=True, text=True).stdout
    with contextlib.suppress(OSError):
        info["loadavg_at_start"] = Path("/proc/loadavg").read_text().split()[:3]
    for tool, args in (("postgres", ["psql", "--version"]), ("redis", ["redis-server", "-v"])):
        if shutil.which(args[0]):
            info[tool] = subprocess.run(args, capture_output=True, text=True).stdout.strip()
    return info


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def conclude(results: dict[str, Any], *, started: float, database: str | None, output: str) -> int:
    """End a benchmark of a database of its own: its time, the database dropped (unless
    ``database`` is ``None``: ``--keep``), ``results`` written to ``output``; exit status 0."""
    import json

    results["seconds"] = round(time.monotonic() - started, 1)
    with contextlib.suppress(OSError):
        results["loadavg_at_end"] = Path("/proc/loadavg").read_text().split()[:3]
    if database is not None:
        from django.db import connections

        connections.close_all()
        drop_database(with_database(services_env()["DATABASE_URL"], database))
    RESULTS.mkdir(exist_ok=True)
    with open(output, "w") as fh:
        json.dump(results, fh, indent=2, default=str)
    log(f"\nWrote {output} ({results['seconds']} s).")
    return 0
