"""Shared fixtures: tiny IMDB-layout archives and real reviews from ../shared/data."""

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from model.config import PLAIN

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
# The real data the tests read (docs/testing.md): ../shared/data beside the repository, as on CI and
# the development machines, or where TEXTFLIX_SHARED_DATA says (as for scripts/ci_container.sh).
SHARED_DATA = Path(os.environ.get("TEXTFLIX_SHARED_DATA") or ROOT.parent / "shared" / "data")
SHARED_ARCHIVE = SHARED_DATA / "aclImdb_v1.tar.gz"
SHARED_MOVIES = SHARED_DATA / "movies.tsv"
SHARED_SST2 = SHARED_DATA / "sst2_dev.tsv"
SHARED_ERASER = SHARED_DATA / "eraser_movies.tar.gz"
SHARED_STEAM = SHARED_DATA / "steam_reviews.csv"
SHARED_SKYTRAX = SHARED_DATA / "skytrax_lounge.csv"
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
    # The CPU default distils from an MPNet teacher, which CI does not install; the tests' builds are
    # plain unless a test asks for a recipe (tests/test_recipe.py builds the distill one with a MiniLM teacher).
    os.environ["TEXTFLIX_RECIPE"] = PLAIN
    yield
    del os.environ["TEXTFLIX_DATA_DIR"], os.environ["TEXTFLIX_RECIPE"]
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


# -- the shared data: a test that reads it fails without it, never skips ----------------------


def shared_file(path: Path) -> Path:
    """``path``, a file of the shared data; the test fails, naming it, when it is missing. A test
    reads the shared data only through the ``shared_*`` fixtures, which mark it ``shared_data``."""
    if not path.is_file():
        pytest.fail(
            f"{path} is missing: this test reads the real data in {SHARED_DATA} (CI and the development machines keep "
            "../shared/data beside the repository; docs/testing.md names each file and where it comes from). "
            "Put the file there, or set TEXTFLIX_SHARED_DATA to the folder that holds it, or leave out the tests "
            'that read it: python -m pytest -m "not shared_data".',
            pytrace=False,
        )
    return path


def needs_shared_data() -> None:
    """Fail the test (never skip it) when the real IMDB archive is missing."""
    shared_file(SHARED_ARCHIVE)


@pytest.fixture(scope="session")
def shared_archive() -> Path:
    """The real IMDB archive (aclImdb_v1.tar.gz)."""
    return shared_file(SHARED_ARCHIVE)


@pytest.fixture(scope="session")
def shared_movies() -> Path:
    """The titles' metadata (movies.tsv)."""
    return shared_file(SHARED_MOVIES)


@pytest.fixture(scope="session")
def shared_sst2() -> Path:
    """SST-2's development set (sst2_dev.tsv)."""
    return shared_file(SHARED_SST2)


@pytest.fixture(scope="session")
def shared_eraser() -> Path:
    """ERASER's annotated movie reviews (eraser_movies.tar.gz)."""
    return shared_file(SHARED_ERASER)


@pytest.fixture(scope="session")
def shared_steam() -> Path:
    """Steam reviews of 101 games (steam_reviews.csv), a corpus that is not IMDB."""
    return shared_file(SHARED_STEAM)


@pytest.fixture(scope="session")
def shared_skytrax() -> Path:
    """Airline lounge reviews (skytrax_lounge.csv), a corpus that is not IMDB."""
    return shared_file(SHARED_SKYTRAX)


@pytest.fixture(scope="session")
def real_reviews(shared_archive):
    """Every labelled review of the real archive."""
    from model.data import read_archive

    return read_archive(shared_archive)


@pytest.fixture(scope="session")
def real_subset_archive(tmp_path_factory, shared_archive) -> Path:
    """An archive in the official layout holding the first 40 real reviews of each labelled folder
    and the first SUBSET_UNSUP unlabeled ones."""
    files = {}
    with tarfile.open(shared_archive, "r|gz") as archive:
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


def _short_train_reviews(real_reviews, per_class: int) -> list:
    chosen = {"positive": [], "negative": []}
    for review in real_reviews:
        if review.split == "train" and len(review.text) < 1200 and len(chosen[review.label]) < per_class:
            chosen[review.label].append(review)
    return [r for pair in zip(chosen["positive"], chosen["negative"]) for r in pair]


SHARED_FIXTURES = {"shared_archive", "shared_movies", "shared_sst2", "shared_eraser", "shared_steam", "shared_skytrax"}


def pytest_collection_modifyitems(items):
    """Every test that uses ``api_data_dir`` is slow: the fixture trains both models (about a minute
    on 2 shared cores), which alone would take a third of the quick run (``pytest -m "not slow"``).
    Every test that reads the shared data (through a ``shared_*`` fixture) is marked ``shared_data``."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "api_data_dir" in fixtures:
            item.add_marker(pytest.mark.slow)
        if fixtures & SHARED_FIXTURES:
            item.add_marker(pytest.mark.shared_data)


@pytest.fixture(scope="session")
def api_data_dir(tmp_path_factory, real_reviews) -> Path:
    """A data dir with real trained models (models/nbsvm, models/bert) and the fixture database."""
    import torch

    from model.config import MINILM, BertConfig, NbsvmConfig
    from model.trained import CLASSIFIERS
    from tests.web_fixtures import build_web_database

    data_dir = tmp_path_factory.mktemp("api-data")
    reviews = _short_train_reviews(real_reviews, 30)
    configs = {
        "nbsvm": (reviews, NbsvmConfig(nbsvm_c=0.1, seed=0)),
        "bert": (reviews[:8], BertConfig(base_model=MINILM, epochs=1, batch_size=8, max_length=64, seed=0)),
    }
    for name, (train, config) in configs.items():
        model = CLASSIFIERS[name].train([r.text for r in train], [r.label for r in train], config, torch.device("cpu"), False)
        model.save(data_dir / "models" / name)
    build_web_database(data_dir / "textflix.db")
    return data_dir


@contextmanager
def serve_in_thread(app, start_timeout: float = 120, **options):
    """Serve ``app`` with uvicorn (and its ``options``) on a free localhost port in a thread; yields its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, **options))
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


@dataclass
class ServerProcess:
    """A ``textflix serve`` process started by ``serve_process``."""

    url: str
    process: subprocess.Popen
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_until_loaded(self, timeout: float = 120) -> None:
        """Return once ``/api/health`` says the models are loaded; fail if the server exits or takes too long."""
        deadline = time.monotonic() + timeout
        while not models_loaded(self.url):
            assert self.process.poll() is None, f"the server exited:\n{self.output()}"
            assert time.monotonic() < deadline, f"the server did not start in {timeout} s:\n{self.output()}"
            time.sleep(0.2)


def models_loaded(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/health", timeout=2).json()["models"]["bert"]
    except httpx.HTTPError:
        return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serve_process(
    data_dir: Path, database_url: str, log: Path, *flags: str, env: dict[str, str] | None = None, wait: bool = True
) -> Iterator[ServerProcess]:
    """``python -m app.cli serve`` on a free localhost port, a real process (group) of its own, yielded
    once its models are loaded (at once with ``wait=False``); its output goes to ``log``. Stopped at
    the end: SIGTERM, then SIGKILL to its whole process group (its workers too)."""
    port = free_port()
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", **(env or {})}
    command = [
        sys.executable, "-m", "app.cli", "serve", "--data-dir", str(data_dir), "--database", database_url,
        "--port", str(port), "--device", "cpu", *flags,
    ]  # fmt: skip
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = ServerProcess(f"http://127.0.0.1:{port}", process, log)
    try:
        if wait:
            server.wait_until_loaded()
        yield server
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(process.pid, signal.SIGKILL)  # whatever is left of the group
        except ProcessLookupError:
            pass
        process.wait()


# -- ERASER's annotated movie reviews (--rationales) ------------------------------------------

# A handful of real annotated reviews: validation ones (sentence numbers given) and test ones
# (sentence numbers -1 in ERASER's file), one of each label.
TINY_DOCS = {"val": ["negR_800", "posR_800"], "test": ["negR_900", "posR_900"]}
MARKUP_DOC = "posR_999"  # a made-up annotated review whose text tries to inject markup


def eraser_files(path: Path) -> dict[str, str]:
    """The members of an ERASER movies tarball (name → text)."""
    with tarfile.open(path, "r:gz") as archive:
        return {m.name: archive.extractfile(m).read().decode("utf-8") for m in archive if m.isfile()}


@pytest.fixture(scope="session")
def tiny_eraser(tmp_path_factory, shared_eraser) -> Path:
    """An ERASER movies tarball of the TINY_DOCS, cut from the real one."""
    files = {}
    for name, text in eraser_files(shared_eraser).items():
        split = name.removeprefix("movies/").removesuffix(".jsonl")
        if name.removeprefix("movies/docs/").removesuffix(".txt") in TINY_DOCS["val"] + TINY_DOCS["test"]:
            files[name] = text
        elif split in TINY_DOCS:
            keep = (line for line in text.splitlines(keepends=True) if json.loads(line)["annotation_id"][:-4] in TINY_DOCS[split])
            files[name] = "".join(keep)
    return write_archive(tmp_path_factory.mktemp("eraser") / "movies.tar.gz", files)


@pytest.fixture(scope="session")
def eraser_with_markup(tiny_eraser, tmp_path_factory) -> Path:
    """``tiny_eraser`` plus one review whose tokens are HTML, annotated where the markup is."""
    files = eraser_files(tiny_eraser)
    lines = ["a fine film .", 'the <script>alert(1)</script> cast is <b>superb</b> .', "go and see it ."]
    files[f"movies/docs/{MARKUP_DOC}.txt"] = "\n".join(lines)
    annotation = {
        "annotation_id": f"{MARKUP_DOC}.txt", "classification": "POS",
        "evidences": [[{"docid": f"{MARKUP_DOC}.txt", "start_token": 7, "end_token": 9, "start_sentence": -1,
                        "end_sentence": -1, "text": "is <b>superb</b>"}]],
    }  # fmt: skip
    files["movies/val.jsonl"] += json.dumps(annotation) + "\n"
    return write_archive(tmp_path_factory.mktemp("eraser-markup") / "movies.tar.gz", files)
