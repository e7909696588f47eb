"""Slow and huge clients, over real sockets to a real uvicorn served as ``textflix serve`` serves
(``app.cli.uvicorn_options``): a huge head is refused at once, slow heads and bodies and idle
connections are closed, an export nobody reads lets the next one in; and the answers around
them: no 5xx for a long id, a CSV safe with any separator, the token optional in OpenAPI where
it is, 405 for a method no route takes.

The server's timeouts are set short here, so that each test takes a few seconds.
"""

import csv
import io
import socket
import time
from contextlib import contextmanager

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.cli import uvicorn_options
from app.db import Review, make_engine
from app.settings import Settings
from app.web.export import FORMULA_STARTS, write_csv
from app.web.main import create_app
from scripts.heartbeat import Heartbeat, connect
from tests.conftest import serve_in_thread, serve_process
from tests.web_fixtures import build_web_database, web_database  # noqa: F401

TIMEOUT_S = 1.0  # the header, body and send timeouts of the server here
KEEP_ALIVE_S = 0.5
SLACK_S = 1.5  # how much later than its timeout a connection may be closed on 2 busy cores
HEARTBEAT_WORST_S = 0.5
LIMITS = dict(
    header_timeout_s=TIMEOUT_S, body_timeout_s=TIMEOUT_S, send_timeout_s=TIMEOUT_S, keep_alive_s=KEEP_ALIVE_S
)


@contextmanager
def limited_server(database: str, **settings):
    """The app on ``database`` served with ``uvicorn_options``; yields (base URL, port)."""
    settings = Settings(database_url=database, allow_anonymous_writes=True, rate_limit="", **LIMITS, **settings)
    with serve_in_thread(create_app(settings), **uvicorn_options(settings)) as url:
        yield url, int(url.rsplit(":", 1)[1])


def read_until_closed(sock: socket.socket, timeout: float) -> tuple[bytes, float]:
    """What the server sends on ``sock`` until it closes it, and after how many seconds; fails past ``timeout``."""
    start, received = time.perf_counter(), b""
    sock.settimeout(timeout)
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail(f"the server kept the connection open over {timeout} s; it sent {received[:200]!r}")
    return received, time.perf_counter() - start


# --- huge heads -----------------------------------------------------------------------------


def test_a_head_over_the_limit_is_answered_431(web_database):
    with limited_server(web_database, max_header_bytes=16 * 1024) as (url, port):
        sock = connect(port)
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 20_000 + b"\r\n\r\n")
        answer, _ = read_until_closed(sock, 5)
        assert answer.startswith(b"HTTP/1.1 431 ") and b"16,384 bytes" in answer
        # just under the limit is a request like any other
        headers = {f"x-{i}": "a" * 100 for i in range(140)}
        assert httpx.get(f"{url}/api/health", headers=headers).status_code == 200


def test_many_small_requests_in_one_packet_are_not_taken_for_one_huge_head(web_database):
    """The limit is a head's: pipelined requests together over it are each answered."""
    request = b"GET /api/health HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 100 + b"\r\n\r\n"
    with limited_server(web_database, max_header_bytes=4096) as (url, port):
        sock = connect(port)
        sock.sendall(request * 100 + b"GET /api/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer, _ = read_until_closed(sock, 10)
    assert answer.count(b"HTTP/1.1 200 ") == 101 and b" 431 " not in answer


def test_a_64_mib_header_is_cut_off_at_once_while_the_server_answers_others(web_database):
    """The issue's probe: a 64 MiB header line held the event loop 7.5 s; now the server stops reading at
    ``max_header_bytes`` and answers 431 (which the client, still sending, may read as a reset)."""
    with limited_server(web_database) as (url, port), Heartbeat(url) as heartbeat:
        time.sleep(0.3)
        start = time.perf_counter()
        sock = connect(port)
        try:
            sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\nX: " + b"a" * (64 << 20) + b"\r\n\r\n")
        except OSError:
            pass  # closed by the server while the client was still sending
        answer, _ = read_until_closed(sock, 5)
        elapsed = time.perf_counter() - start
        time.sleep(0.3)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431 ")
    assert elapsed < 1.0
    assert heartbeat.beats >= 3 and heartbeat.worst < HEARTBEAT_WORST_S and not heartbeat.failures


def test_serve_with_worker_processes_has_the_same_bounds(web_database, tmp_path):
    """``textflix serve --workers 2`` hands uvicorn's options to processes of their own: the bounds go with them."""
    env = {"TEXTFLIX_MAX_HEADER_BYTES": "16384", "TEXTFLIX_HEADER_TIMEOUT_S": str(TIMEOUT_S)}
    with serve_process(tmp_path, web_database, tmp_path / "serve.log", "--workers", "2", env=env, wait=False) as server:
        deadline = time.monotonic() + 120
        while not answers(f"{server.url}/api/health"):
            assert server.process.poll() is None and time.monotonic() < deadline, server.output()
            time.sleep(0.3)
        port = int(server.url.rsplit(":", 1)[1])
        sock = connect(port)
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 20_000 + b"\r\n\r\n")
        assert read_until_closed(sock, 5)[0].startswith(b"HTTP/1.1 431 ")
        assert read_until_closed(connect(port), TIMEOUT_S + SLACK_S)[0].startswith(b"HTTP/1.1 408 ")


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


# --- slow and idle clients ------------------------------------------------------------------


def test_a_head_sent_a_line_at_a_time_is_cut_off_after_the_header_timeout(web_database):
    with limited_server(web_database) as (url, port), Heartbeat(url) as heartbeat:
        sock = connect(port)
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n")
        start = time.perf_counter()
        with pytest.raises(OSError):
            while time.perf_counter() - start < TIMEOUT_S + SLACK_S:
                sock.sendall(b"X: y\r\n")
                time.sleep(0.2)
        answer, _ = read_until_closed(sock, 1)
    assert time.perf_counter() - start < TIMEOUT_S + SLACK_S
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408 ")
    assert heartbeat.worst < HEARTBEAT_WORST_S and not heartbeat.failures


def test_a_body_that_stalls_is_answered_408_after_the_body_timeout(web_database):
    with limited_server(web_database) as (url, port):
        sock = connect(port)
        head = b"POST /api/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        sock.sendall(head + b'{"texts": ')
        answer, seconds = read_until_closed(sock, TIMEOUT_S + SLACK_S)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"body" in answer
    assert seconds >= TIMEOUT_S * 0.9


def test_a_connection_that_sends_nothing_is_closed_after_the_header_timeout(web_database):
    with limited_server(web_database) as (url, port):
        answer, seconds = read_until_closed(connect(port), TIMEOUT_S + SLACK_S)
    assert answer.startswith(b"HTTP/1.1 408 ") and seconds >= TIMEOUT_S * 0.9


def test_an_idle_keep_alive_connection_is_closed(web_database):
    with limited_server(web_database) as (url, port):
        sock = connect(port)
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
        answer, _ = read_until_closed(sock, KEEP_ALIVE_S + SLACK_S)
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.count(b"HTTP/1.1") == 1


# --- an export nobody reads -----------------------------------------------------------------


@pytest.fixture(scope="module")
def big_database(tmp_path_factory) -> str:
    """The fixture database with 500 long user reviews more: an export of about 10 MB, over what the
    kernel's buffers between a server and a client on this machine hold."""
    url = build_web_database(tmp_path_factory.mktemp("big-export") / "textflix.db")
    text = "A long review of a film, sentence after sentence. " * 400
    with Session(make_engine(url)) as session:
        session.add_all(
            Review(title_id="tt0100001", text=text, split="catalogue", source="user", word_count=len(text.split()))
            for _ in range(500)
        )
        session.commit()
    return url


def export_status(url: str) -> int:
    with httpx.stream("GET", f"{url}/api/export.jsonl", timeout=30) as response:
        return response.status_code


def test_an_export_whose_client_stops_reading_lets_the_next_one_in_after_the_send_timeout(big_database):
    with limited_server(big_database) as (url, port), Heartbeat(url) as heartbeat:
        holder = connect(port, receive_buffer=4096)
        holder.sendall(b"GET /api/export.jsonl HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        time.sleep(0.3)
        assert export_status(url) == 429  # the first export holds the lock, its client reading nothing
        start = time.perf_counter()
        while (status := export_status(url)) == 429 and time.perf_counter() - start < TIMEOUT_S + SLACK_S + 1:
            time.sleep(0.2)
        holder.close()
    assert status == 200
    assert heartbeat.worst < HEARTBEAT_WORST_S and not heartbeat.failures


# --- answers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("digits", [19, 20, 4300, 4301, 10_000])
def test_a_long_review_id_is_not_found_and_not_echoed(web_database, digits):
    app = create_app(Settings(database_url=web_database))
    with TestClient(app) as client:
        for path in (f"/reviews/{'9' * digits}", f"/reviews/{'9' * digits}.json"):
            response = client.get(path, headers={"Accept": "application/json"})
            assert response.status_code == 404, path
            assert len(response.json()["detail"][0]["message"]) < 200
        response = client.get(f"/api/reviews/{'9' * digits}")
        assert response.status_code == 422 and len(response.text) < 500
        response = client.get(f"/api/{'x' * digits}")
        assert response.status_code == 404 and len(response.text) < 500
        assert client.get(f"/reviews/{'0' * digits}1.json").status_code == 200  # review 1, however spelt


def test_csv_cells_are_quoted_and_safe_for_a_semicolon_or_tab_separator(tmp_path):
    url = build_web_database(tmp_path / "textflix.db")
    texts = ["Great film;=1+1;x", "Fine\t@SUM(A1)", "Good, -2+3 stars", 'So "x";"=1+1"', "Line\n+1+1"]
    with Session(make_engine(url)) as session:
        session.add_all(
            Review(title_id="tt0100001", text=t, split="catalogue", source="user", word_count=2) for t in texts
        )
        session.commit()
    out = io.StringIO()
    write_csv(make_engine(url), out)
    exported = out.getvalue()
    assert [line["text"] for line in csv.DictReader(io.StringIO(exported))][-len(texts) :] == [
        "Great film;'=1+1;x", "Fine\t'@SUM(A1)", "Good, '-2+3 stars", 'So "x";"\'=1+1"', "Line\n'+1+1"
    ]  # fmt: skip
    assert exported.startswith('"id","title_id"')  # every cell quoted
    for separator in (",", ";", "\t"):  # a spreadsheet that splits on the separator, quotes or not
        cells = [cell.strip(' "') for line in exported.splitlines() for cell in line.split(separator)]
        assert [cell for cell in cells if cell[:1] in FORMULA_STARTS] == []


@pytest.mark.parametrize("token", [None, "s3cret"])
def test_openapi_says_the_token_is_optional_where_the_server_takes_requests_without_it(web_database, token):
    settings = Settings(database_url=web_database, api_token=token)
    with TestClient(create_app(settings)) as client:
        paths = client.get("/openapi.json").json()["paths"]
    for path, method in (("/api/predict", "post"), ("/api/reviews", "post"), ("/api/export.jsonl", "get")):
        expected = [{"HTTPBearer": []}] if token else [{"HTTPBearer": []}, {}]
        assert paths[path][method]["security"] == expected, path


@pytest.mark.parametrize("method", ["PUT", "PATCH", "POST", "DELETE"])
def test_a_method_no_route_takes_is_405_with_allow(web_database, method):
    with TestClient(create_app(Settings(database_url=web_database))) as client:
        for path, allowed in (("/api/health", "GET"), ("/api/movies", "GET"), ("/reviews/1", "GET")):
            response = client.request(method, path)
            assert response.status_code == 405 and response.headers["allow"] == allowed, (method, path)
        if method != "POST":
            response = client.request(method, "/api/predict", json={"texts": ["Good."]})
            assert response.status_code == 405 and response.headers["allow"] == "POST"
