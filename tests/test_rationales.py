"""ERASER's annotated reviews (model.rationales): reading the tarball, and the plausibility figures
on hand-made cases."""

import io
import itertools
import json
import tarfile
from pathlib import Path

import pytest

from model.data import DataError
from model.rationales import (
    RationaleReview,
    auprc,
    baseline_scores,
    iou_matches,
    plausibility,
    read_rationales,
    token_f1,
    top_k,
)
from model.sentences import Span
from tests.conftest import SHARED_DATA

SHARED_ERASER = SHARED_DATA / "eraser_movies.tar.gz"
# A handful of real annotated reviews: validation ones (sentence numbers given) and test ones
# (sentence numbers -1 in ERASER's file), one of each label.
TINY_DOCS = {"val": ["negR_800", "posR_800"], "test": ["negR_900", "posR_900"]}


def write_tarball(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture(scope="session")
def tiny_eraser(tmp_path_factory) -> Path:
    """An ERASER movies tarball of the TINY_DOCS, cut from the real one."""
    if not SHARED_ERASER.is_file():
        pytest.skip(f"{SHARED_ERASER} is not there (CI and development keep ../shared beside the repo)")
    wanted = {f"movies/docs/{doc}.txt" for docs in TINY_DOCS.values() for doc in docs}
    files = {}
    with tarfile.open(SHARED_ERASER, "r:gz") as archive:
        for member in archive:
            if member.name in wanted:
                files[member.name] = archive.extractfile(member).read()
            elif member.name in {"movies/val.jsonl", "movies/test.jsonl"}:
                split = member.name.split("/")[1].removesuffix(".jsonl")
                lines = archive.extractfile(member).read().decode().splitlines(keepends=True)
                keep = [line for line in lines if any(f'"{doc}.txt"' in line.split(",")[0] for doc in TINY_DOCS[split])]
                files[member.name] = "".join(keep).encode()
    return write_tarball(tmp_path_factory.mktemp("eraser") / "movies.tar.gz", files)


def test_reads_the_annotated_reviews_with_their_passages(tiny_eraser):
    reviews = read_rationales(tiny_eraser)
    assert [r.doc for r in reviews] == ["negR_800", "negR_900", "posR_800", "posR_900"]
    assert [r.label for r in reviews] == ["negative", "negative", "positive", "positive"]
    for review in reviews:
        tokens = review.text.split()
        assert review.evidence and all(0 <= start < end <= len(tokens) for start, end in review.evidence)
        assert all(review.text[s.start : s.end] == s.text for s in review.sentences)
        assert review.sentence_tokens()[-1][1] == len(tokens)  # every token in a sentence
        assert any(review.evidence_sentences()) and not all(review.evidence_sentences())
    first = reviews[0]  # negR_800: "nothing really worth watching" is tokens 618-622, in sentence 27
    assert (618, 622) in first.evidence
    assert " ".join(first.text.split()[618:622]) == "nothing really worth watching"
    assert first.evidence_sentences()[27] and not first.evidence_sentences()[0]


def test_a_truncated_or_missing_tarball_is_named(tiny_eraser, tmp_path):
    truncated = tmp_path / "cut.tar.gz"
    truncated.write_bytes(tiny_eraser.read_bytes()[:2000])
    with pytest.raises(DataError, match="not a readable ERASER movies archive"):
        read_rationales(truncated)
    with pytest.raises(DataError, match="no such file"):
        read_rationales(tmp_path / "absent.tar.gz")
    other = write_tarball(tmp_path / "other.tar.gz", {"movies/docs/negR_000.txt": b"a line .\n"})
    with pytest.raises(DataError, match="no movies/val.jsonl"):
        read_rationales(other)


def hand_made() -> RationaleReview:
    """Four sentences of two tokens; the annotators marked the second sentence and half the fourth."""
    text = "a b c d e f g h"
    sentences = [Span(i * 4, i * 4 + 3, text[i * 4 : i * 4 + 3]) for i in range(4)]
    return RationaleReview("posR_000", "positive", text, sentences, [(2, 4), (6, 7)])


def test_auprc_is_one_for_a_perfect_ranking_and_lowest_reversed():
    truth = [False, True, False, True]
    assert auprc(truth, [0.1, 0.9, 0.2, 0.8]) == pytest.approx(1.0)
    reversed_ranking = auprc(truth, [0.9, 0.1, 0.8, 0.2])
    assert reversed_ranking < auprc(truth, [0.1, 0.9, 0.8, 0.2]) < 1.0
    # the floor: no ranking of these four sentences scores lower than the reversed one
    assert reversed_ranking == pytest.approx(min(auprc(truth, list(s)) for s in itertools.permutations([1, 2, 3, 4])))


def test_token_f1_and_iou_f1_on_hand_made_spans():
    assert token_f1({1, 2, 3}, {1, 2, 3}) == 1.0
    assert token_f1({1, 2}, {3, 4}) == 0.0
    assert token_f1({1, 2, 3, 4}, {3, 4}) == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert iou_matches([(2, 4)], [(2, 4), (0, 2)]) == 1  # IOU 1 and 0
    assert iou_matches([(6, 7)], [(6, 8)]) == 1  # IOU 0.5: a match, at ERASER's threshold
    assert iou_matches([(6, 7)], [(5, 8)]) == 0  # IOU 1/3
    assert top_k([0.2, 0.9, 0.2, 0.5], 2) == [1, 3] and top_k([1, 1, 1], 2) == [0, 1]


def test_plausibility_of_a_hand_made_review():
    review = hand_made()
    assert review.sentence_tokens() == [(0, 2), (2, 4), (4, 6), (6, 8)]
    assert review.evidence_sentences() == [False, True, False, True]
    best = plausibility([review], [[0, 1, 0, 0.5]])  # k = 2: sentences 1 and 3, tokens 2-3 and 6-7
    assert best["auprc"] == pytest.approx(1.0)
    assert best["token_f1"] == pytest.approx(2 * (3 / 4) * 1 / (3 / 4 + 1))  # 3 of 4 chosen tokens annotated
    # sentence 1 matches (2, 4) exactly, sentence 3 matches (6, 7) at IOU 0.5: precision 1, recall 1
    assert best["iou_f1"] == pytest.approx(1.0)
    worst = plausibility([review], [[1, 0, 0.5, 0]])
    assert worst["token_f1"] == 0.0 and worst["iou_f1"] == 0.0 and worst["auprc"] < 1.0


def test_the_baselines_on_the_real_reviews(tiny_eraser):
    reviews = read_rationales(tiny_eraser)
    figures = baseline_scores(reviews, seed=42)
    assert set(figures) == {"random", "position"}
    for name in ("auprc", "token_f1", "iou_f1"):
        assert 0 <= figures["random"][name]["mean"] <= 1 and figures["random"][name]["std"] >= 0
        assert 0 <= figures["position"][name] <= 1
    assert baseline_scores(reviews, seed=42) == figures  # seeded


MARKUP_DOC = "posR_999"  # a made-up annotated review whose text tries to inject markup


@pytest.fixture(scope="session")
def eraser_with_markup(tiny_eraser, tmp_path_factory) -> Path:
    """``tiny_eraser`` plus one review whose tokens are HTML, annotated where the markup is."""
    files = {}
    with tarfile.open(tiny_eraser, "r:gz") as archive:
        for member in archive:
            files[member.name] = archive.extractfile(member).read()
    lines = ["a fine film .", 'the <script>alert(1)</script> cast is <b>superb</b> .', "go and see it ."]
    files[f"movies/docs/{MARKUP_DOC}.txt"] = "\n".join(lines).encode()
    annotation = {
        "annotation_id": f"{MARKUP_DOC}.txt", "classification": "POS",
        "evidences": [[{"docid": f"{MARKUP_DOC}.txt", "start_token": 5, "end_token": 7, "start_sentence": -1,
                        "end_sentence": -1, "text": "is <b>superb</b>"}]],
    }  # fmt: skip
    files["movies/val.jsonl"] += (json.dumps(annotation) + "\n").encode()
    return write_tarball(tmp_path_factory.mktemp("eraser-markup") / "movies.tar.gz", files)


@pytest.mark.slow
def test_a_build_scores_the_highlights_against_people_and_shows_them(tmp_path, eraser_with_markup):
    from fastapi.testclient import TestClient

    from app.cli import main
    from app.db import make_engine
    from app.offline.pipeline import report
    from app.settings import Settings
    from app.web.main import create_app
    from tests.conftest import SHARED_ARCHIVE
    from tests.test_pipeline import build_args

    data = tmp_path / "data"
    assert main(build_args(tmp_path, SHARED_ARCHIVE, "--recipe", "plain", "--rationales", str(eraser_with_markup))) == 0
    record = report(make_engine(f"sqlite:///{data / 'textflix.db'}"))
    figures = record["metrics"]["rationales"]
    assert figures["n"] == 5 and set(figures["models"]) == {"nbsvm", "bert"}
    for model in ("nbsvm", "bert"):
        scores = figures["models"][model]
        assert 0 <= scores["accuracy"] <= 1 and 0 <= scores["auprc"] <= 1 and 0 <= scores["token_f1"] <= 1
        assert scores["comprehensiveness"] is not None and scores["random_comprehensiveness"] is not None
    assert set(figures["random"]["auprc"]) == {"mean", "std"} and figures["best_sentences"]["auprc"] == 1.0
    assert {d["doc"] for d in figures["agree_most"]} <= {"negR_800", "posR_800", "negR_900", "posR_900", MARKUP_DOC}
    assert record["steps"]["rationales"]["reviews"] == 5

    client = TestClient(create_app(Settings(data_dir=data)))
    about = client.get("/about")
    assert about.status_code == 200 and "Do the highlights agree with people" in about.text
    assert "Random sentences" in about.text and "/rationales/" in about.text
    assert client.get("/about.json").json()["rationales"]["state"] == "measured"
    page = client.get(f"/rationales/{MARKUP_DOC}")
    assert page.status_code == 200
    assert "<script>alert" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert '<u class="evidence">is &lt;b&gt;superb&lt;/b&gt;</u>' in page.text
    twin = client.get(f"/rationales/{MARKUP_DOC}.json").json()
    assert [p["text"] for p in twin["passages"]] == ["is <b>superb</b>"]
    assert [s["evidence"] for s in twin["sentences"]] == [False, True, False]
    assert client.get("/rationales/negR_800").status_code == 200
    missing = client.get("/rationales/negR_123")
    assert missing.status_code == 404 and "not among ERASER" in missing.text
    # the catalogue never shows ERASER's reviews
    assert "ERASER" not in client.get("/").text
