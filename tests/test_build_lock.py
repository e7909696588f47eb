"""Two builds at once: while one holds the data directory or the database, another stops at
once with one sentence and writes nothing; a killed build leaves no lock behind.

The first build is a real process, frozen with SIGSTOP once it runs its steps, so it holds
its locks for as long as the test needs, and later killed with SIGKILL, like a power cut.
"""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from app.db import display_url
from app.settings import Settings
from app.web.main import create_app
from tests.conftest import ROOT, empty_postgresql
from tests.test_pipeline import SMALL, count

pytestmark = pytest.mark.slow  # each test runs real builds


def environment() -> dict[str, str]:
    """The builds' environment, read when a build starts: at import, conftest's isolated_settings
    (TEXTFLIX_RECIPE=plain) is not in place yet, and a build of the CPU default reaches its MPNet
    teacher, which CI does not install, within a second."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def command(name: str, archive: Path, data_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", name, "--imdb", str(archive), "--data-dir", str(data_dir), *SMALL, *extra]


@contextmanager
def build_in_steps(arguments: list[str], log: Path) -> Iterator[subprocess.Popen]:
    """A build process, yielded once it logs its first step (it holds its locks by then); killed at the end."""
    with open(log, "w") as stderr:
        process = subprocess.Popen(arguments, cwd=ROOT, env=environment(), stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + 300
        while "Step " not in log.read_text():
            assert process.poll() is None, f"the build ended before its first step:\n{log.read_text()}"
            assert time.monotonic() < deadline, "the build logged no step in 300 s"
            time.sleep(0.2)
        yield process
    finally:
        process.kill()
        process.wait()


def freeze(build: subprocess.Popen) -> None:
    """Stop ``build`` where it is; it must still be running its steps (and so hold its locks)."""
    build.send_signal(signal.SIGSTOP)
    assert build.poll() is None, f"the build had ended (exit {build.returncode}) before it was stopped"


def refused(arguments: list[str]) -> str:
    """Run a build that must stop at once; returns its one line on stderr."""
    result = subprocess.run(arguments, cwd=ROOT, env=environment(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


def files(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``directory`` with its size and modification time."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.rglob("*") if p.is_file()}


def another_build(pid: int, what: str) -> str:
    return (
        f"textflix: error: Another textflix build (pid {pid} on {socket.gethostname()}) is running on {what}; "
        "wait for it to finish or stop it."
    )


def test_a_second_build_on_the_same_data_directory_stops_at_once(tmp_path, real_subset_archive):
    data_dir = tmp_path / "data"
    build = command("build", real_subset_archive, data_dir)
    with build_in_steps(build, tmp_path / "first.log") as first:
        freeze(first)  # holds its locks, writes nothing more
        before = files(data_dir)

        same_database = another_build(first.pid, f"the database {(data_dir / 'textflix.db').resolve()}")
        assert refused(build) == same_database
        assert refused(command("up", real_subset_archive, data_dir)) == same_database
        other_database = tmp_path / "other.db"
        assert refused(build + ["--database", f"sqlite:///{other_database}"]) == another_build(
            first.pid, f"the data directory {data_dir.resolve()}"
        )

        assert files(data_dir) == before
        assert not other_database.exists()
        assert count(data_dir / "textflix.db", "SELECT COUNT(*) FROM runs") == 1
        first.send_signal(signal.SIGKILL)

    with build_in_steps(build, tmp_path / "after-kill.log"):
        pass  # the killed build's locks went with it
    assert count(data_dir / "textflix.db", "SELECT COUNT(*) FROM runs") == 1  # it resumed the same run


def progress(db: Path) -> dict | None:
    """The progress in the run record of the build of ``db`` (which it has created by its first step)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        [written] = connection.execute("SELECT progress FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    return json.loads(written) if written else None


def test_about_says_a_killed_build_stopped_instead_of_showing_its_last_progress(tmp_path, real_subset_archive):
    """A killed build cannot clear the progress it wrote in the run record; /about looks up its process."""
    data_dir = tmp_path / "data"
    db = data_dir / "textflix.db"
    with build_in_steps(command("build", real_subset_archive, data_dir), tmp_path / "build.log") as build:
        deadline = time.monotonic() + 120
        while True:  # frozen in the middle of a step, its progress written
            assert time.monotonic() < deadline, "the build wrote no progress"
            if progress(db) is not None:
                build.send_signal(signal.SIGSTOP)
                if (written := progress(db)) is not None:
                    break
                build.send_signal(signal.SIGCONT)
            time.sleep(0.05)
        doing = written["doing"]
        with TestClient(create_app(Settings(data_dir=data_dir, device="cpu"))) as client:
            assert client.get("/about.json").json()["build_progress"].startswith(doing[0].upper() + doing[1:])
            assert client.get("/about").status_code == 200
            build.send_signal(signal.SIGKILL)
            build.wait()
            assert progress(db) == written  # left behind
            line = client.get("/about.json").json()["build_progress"]
            assert line.startswith(f"The build stopped before it had finished (its process, pid {build.pid}, has ended)")
            assert doing not in client.get("/about").text


def test_about_says_which_step_of_a_build_failed(tmp_path, real_subset_archive):
    """A step that fails leaves its name and what stopped it in the run record: /about says the build
    failed there, not that it has not finished."""
    data_dir = tmp_path / "data"
    (data_dir / "models").mkdir(parents=True)
    (data_dir / "models" / "nbsvm").write_text("a file where the NB-SVM model's folder goes")
    build = command("build", real_subset_archive, data_dir)
    result = subprocess.run(build, cwd=ROOT, env=environment(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr
    assert progress(data_dir / "textflix.db")["failed"] == "NotADirectoryError"  # its kind: the message names paths
    with TestClient(create_app(Settings(data_dir=data_dir, device="cpu"))) as client:
        line = client.get("/about.json").json()["build_progress"]
        assert line.startswith("The build's nbsvm step failed (NotADirectoryError): what it had not computed is missing")
        assert str(data_dir) not in client.get("/about").text


def test_a_second_build_on_the_same_postgresql_database_stops_at_once(tmp_path, real_subset_archive):
    url = empty_postgresql()
    engine = create_engine(url)
    second_dir = tmp_path / "second"
    first_build = command("build", real_subset_archive, tmp_path / "first", "--database", url)
    second = command("build", real_subset_archive, second_dir, "--database", url)
    with build_in_steps(first_build, tmp_path / "first.log") as first:
        freeze(first)
        assert refused(second) == another_build(first.pid, f"the database {display_url(url)}")
        assert not second_dir.exists()
        with engine.connect() as connection:
            assert connection.scalar(text("SELECT COUNT(*) FROM runs")) == 1
        first.send_signal(signal.SIGKILL)

    with build_in_steps(second, tmp_path / "after-kill.log"):
        pass  # PostgreSQL ended the killed build's session, and its lock with it
    with engine.connect() as connection:
        assert connection.scalar(text("SELECT COUNT(*) FROM runs")) == 1
    engine.dispose()
