"""Every answer drawn from a review's analysis, compared with the answers recorded before the analysis became
one typed value (issue 54): the API's JSON stays the same, field for field.

Two real tiny builds (``api_data_dir``: NB-SVM on 60 real reviews, MiniLM fine-tuned on 8, reading a text
as the sum of its sentences), one of them with a teacher that reads every text of one sentence, answer
``/api/predict`` (plain and explained), ``POST /api/reviews`` (stored and not), ``/analyze.json``, the stored
review's page twin and API answer, and the export's rows. The server of a build still running answers the
same with stand-in models (``tests.web_fixtures.stand_in_models``): BERT pending, then nothing ready.
The OpenAPI schema of the analysis endpoints is compared too: field names, types and which are required.

Recorded in ``tests/recorded/analysis_answers.json``; ``RECORD_ANSWERS=1`` writes it anew (only for a
change of the answers that is meant).
"""

import json
import math
import os
import shutil
from pathlib import Path

import torch
from fastapi.testclient import TestClient

from app.web.deps import database_engine
from app.web.main import create_app
from app.web.ready_analyzer import ReadyAnalyzer
from model.artifacts import update_meta
from model.bert import OFFSET, ONE_SENTENCE_READER, BertClassifier
from model.config import MINILM, BertConfig
from tests.test_api import REVIEW, TITLE, api_settings
from tests.web_fixtures import PENDING_RUN, RUN, build_web_database, set_run, stand_in_models

RECORDED = Path(__file__).parent / "recorded" / "analysis_answers.json"
ONE_SENTENCE = "A wonderful, moving film with brilliant acting."
# BERT reads a text's LIME samples in micro-batches whose make-up may depend on timing, and bfloat16 sums
# differ by batch, by about 1e-3 in log-odds (``app.web.whatif``); three runs here gave equal floats.
FLOAT_TOLERANCE = 2e-3
# Fields added after the recording, by the issue that added them: an answer may carry them beside the recorded ones.
ADDED = {
    "words": "issue 55: BERT's word shares, with `words`",
    "words_seconds": "issue 55: /analyze.json, what the words of the analysed text would take here",
}
ENDPOINTS = ("/api/predict", "/api/reviews", "/api/reviews/{review_id}", "/api/export.jsonl")


def copy_build(data_dir: Path, to: Path) -> Path:
    """A copy of the tiny build at ``data_dir`` with a fresh fixture database (other tests store reviews in theirs)."""
    shutil.copytree(data_dir / "models", to / "models")
    build_web_database(to / "textflix.db")
    return to


def add_teacher(data_dir: Path) -> None:
    """A teacher that reads every text of one sentence whole (``--one-sentence-reader teacher``)."""
    teacher = BertClassifier.pretrained(BertConfig(base_model=MINILM, max_length=64, pooling="cls", seed=3), torch.device("cpu"))
    teacher.offset = -2.0  # an untrained head reads every text near even odds
    teacher.save(data_dir / "models" / "teacher", {OFFSET: teacher.offset})
    update_meta(data_dir / "models" / "bert", {ONE_SENTENCE_READER: "teacher"})


def answers_of(client: TestClient) -> dict:
    """Each answer drawn from an analysis, by request."""
    answers = {}
    for explain in (False, True):
        response = client.post("/api/predict", json={"texts": [ONE_SENTENCE, REVIEW], "explain": explain})
        answers[f"predict explain={explain}"] = (response.status_code, response.json())
    for text in (ONE_SENTENCE, REVIEW):
        response = client.post("/analyze.json", data={"text": text})
        answers[f"analyze.json {text[:20]}"] = (response.status_code, response.json())
    response = client.post("/api/reviews", json={"text": REVIEW, "label": "negative"})
    answers["review not stored"] = (response.status_code, response.json())
    response = client.post("/api/reviews", json={"text": REVIEW, "title_id": TITLE, "label": "positive"})
    answers["review stored"] = (response.status_code, response.json())
    review_id = response.json()["id"]
    for path in (f"/api/reviews/{review_id}", f"/reviews/{review_id}.json"):
        response = client.get(path)
        answers[path.replace(str(review_id), "{id}")] = (response.status_code, response.json())
    rows = [json.loads(line) for line in client.get("/api/export.jsonl").text.splitlines()]
    answers["export rows"] = rows
    return answers


def schema_fields(schema: dict, components: dict, seen: tuple = ()) -> object:
    """A schema reduced to its fields' names, types and whether each is required (``$ref``s followed)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"<{name} again>" if name in seen else schema_fields(components[name], components, (*seen, name))
    kept = {}
    for key, value in schema.items():
        if key in ("properties", "$defs"):
            kept[key] = {field: schema_fields(inner, components, seen) for field, inner in value.items()}
        elif isinstance(value, dict):
            kept[key] = schema_fields(value, components, seen)
        elif isinstance(value, list) and key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            kept[key] = [schema_fields(inner, components, seen) for inner in value]
        elif key in ("type", "required", "enum", "const", "additionalProperties", "minimum", "maximum", "format"):
            kept[key] = value
    return kept


def openapi_fields(app) -> dict:
    """The request and answer schemas of the analysis endpoints, as ``schema_fields``."""
    document = app.openapi()
    components = document["components"]["schemas"]
    return {
        f"{method} {path}": schema_fields(operation, components)
        for path in ENDPOINTS
        for method, operation in document["paths"][path].items()
    }


def stand_in_client(url: str) -> TestClient:
    """The app of a build still running over ``url``: its ``ReadyAnalyzer`` loads stand-in models."""
    app = create_app(api_settings(Path(url.removeprefix("sqlite:///")).parent, build_poll_s=3600))
    app.state.analyzer = ReadyAnalyzer(
        app.state.settings, app.state.build, lambda: database_engine(app), app.state.write_lock, stand_in_models
    )
    return TestClient(app, base_url="http://localhost")


def pending_answers(tmp_path: Path) -> dict:
    """The answers of a server whose build is still making BERT ready, then of one whose build has made none."""
    answers = {}
    for state, run in (("bert_pending", PENDING_RUN), ("none_ready", RUN)):
        url = build_web_database(tmp_path / state / "textflix.db", run, ("nbsvm",))
        if state == "none_ready":
            set_run(url, status="running", steps={"data": {"seconds": 12.5}})
        with stand_in_client(url) as client:
            answers[state] = {
                key: value for key, value in answers_of(client).items() if key != "export rows"
            } if state == "bert_pending" else {
                "predict explain=True": client.post("/api/predict", json={"texts": [REVIEW], "explain": True}).json(),
                "review stored": client.post("/api/reviews", json={"text": REVIEW, "title_id": TITLE}).json(),
            }  # fmt: skip
    return answers


def all_answers(api_data_dir: Path, tmp_path: Path) -> dict:
    answers = {}
    plain = copy_build(api_data_dir, tmp_path / "plain")
    routed = copy_build(api_data_dir, tmp_path / "routed")
    add_teacher(routed)
    for name, data_dir in (("plain build", plain), ("teacher build", routed)):
        app = create_app(api_settings(data_dir))
        with TestClient(app, base_url="http://localhost") as client:
            answers[name] = answers_of(client)
        if name == "plain build":
            answers["openapi"] = openapi_fields(app)
    answers.update(pending_answers(tmp_path))
    return answers


def differences(recorded, now, at: str = "") -> list[str]:
    """Where ``now`` differs from ``recorded``: the same keys (in any order: a JSON object's are unordered; those
    ``ADDED`` since may be there too) and items, each value equal, floats within ``FLOAT_TOLERANCE``."""
    if isinstance(recorded, dict) and isinstance(now, dict):
        if sorted(recorded) != sorted(key for key in now if key in recorded or key not in ADDED):
            return [f"{at}: keys {list(recorded)} became {list(now)}"]
        return [found for key in recorded for found in differences(recorded[key], now[key], f"{at}.{key}")]
    if isinstance(recorded, list) and isinstance(now, list):
        if len(recorded) != len(now):
            return [f"{at}: {len(recorded)} items became {len(now)}"]
        return [found for i, (a, b) in enumerate(zip(recorded, now)) for found in differences(a, b, f"{at}[{i}]")]
    if isinstance(recorded, float) and isinstance(now, float) and math.isclose(recorded, now, abs_tol=FLOAT_TOLERANCE):
        return []
    if type(recorded) is not type(now) or recorded != now:
        return [f"{at}: {recorded!r} became {now!r}"]
    return []


def test_every_answer_drawn_from_an_analysis_is_the_recorded_one(api_data_dir, tmp_path):
    answers = json.loads(json.dumps(all_answers(api_data_dir, tmp_path)))  # tuples as lists, as recorded
    if os.environ.get("RECORD_ANSWERS") == "1":
        RECORDED.parent.mkdir(exist_ok=True)
        RECORDED.write_text(json.dumps(answers, indent=1, ensure_ascii=False) + "\n")
    found = differences(json.loads(RECORDED.read_text()), answers)
    assert not found, "\n".join(found[:40])
