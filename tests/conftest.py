"""Shared fixtures: tiny IMDB-layout archives and real reviews from ../shared/data."""

import io
import os
import re
import socket
import tarfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
SHARED_ARCHIVE = SHARED_DATA / "aclImdb_v1.tar.gz"
SHARED_MOVIES = SHARED_DATA / "movies.tsv"
MEMBER = re.compile(r"^aclImdb/(train|test)/(pos|neg)/(\d+)_\d+\.txt$")
UNSUP_MEMBER = re.compile(r"^aclImdb/train/unsup/(\d+)_0\.txt$")
SUBSET_UNSUP = 200  # unlabeled reviews in real_subset_archive


@pytest.fixture(scope="session", autouse=True)
def isolated_settings(tmp_path_factory):
    """Tests never see the developer's TEXTFLIX_* variables nor the repository's data/ folder."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("TEXTFLIX_")}
    for name in saved:
        if name != "TEXTFLIX_TEST_POSTGRES_URL":
            del os.environ[name]
    os.environ["TEXTFLIX_DATA_DIR"] = str(tmp_path_factory.mktemp("textflix-data"))
    yield
    del os.environ["TEXTFLIX_DATA_DIR"]
    os.environ.update(saved)


def write_archive(path: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (archive member name → text) as a gzipped tarball."""
    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            blob = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            archive.addfile(info, io.BytesIO(blob))
    return path


def needs_shared_data():
    if not SHARED_ARCHIVE.is_file():
        pytest.skip(f"{SHARED_ARCHIVE} is not there (CI and development keep ../shared beside the repo)")


@pytest.fixture(scope="session")
def real_reviews():
    """Every labelled review of the real archive."""
    needs_shared_data()
    from model.data import read_archive

    return read_archive(SHARED_ARCHIVE)


@pytest.fixture(scope="session")
def real_subset_archive(tmp_path_factory) -> Path:
    """An archive in the official layout holding the first 40 real reviews of each labelled folder
    and the first SUBSET_UNSUP unlabeled ones."""
    needs_shared_data()
    files = {}
    with tarfile.open(SHARED_ARCHIVE, "r|gz") as archive:
        for member in archive:
            m = MEMBER.match(member.name)
            u = UNSUP_MEMBER.match(member.name)
            keep = (
                (m and int(m.group(3)) < 40)
                or (u and int(u.group(1)) < SUBSET_UNSUP)
                or re.search(r"/(train|test)/urls_(pos|neg)\.txt$", member.name)
            )
            if member.isfile() and keep:
                files[member.name] = archive.extractfile(member).read().decode("utf-8")
    return write_archive(tmp_path_factory.mktemp("imdb") / "aclImdb_v1.tar.gz", files)


@contextmanager
def serve_in_thread(app, start_timeout: float = 120):
    """Serve ``app`` with uvicorn on a free localhost port in a thread; yields its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()


def empty_postgresql() -> str:
    """The database of TEXTFLIX_TEST_POSTGRES_URL (CI starts one) without Textflix's tables;
    skips the test when the variable is unset."""
    url = os.environ.get("TEXTFLIX_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("TEXTFLIX_TEST_POSTGRES_URL is not set")
    from sqlalchemy import create_engine, text

    from app.db import Base

    engine = create_engine(url)
    with engine.begin() as connection:
        Base.metadata.drop_all(connection)
        connection.execute(text("DROP TABLE IF EXISTS alembic_version"))
    engine.dispose()
    return url
