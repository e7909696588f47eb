"""ERASER's annotated reviews (model.rationales): reading the tarball, and the plausibility figures
on hand-made cases."""

import itertools

import pytest

from model.data import DataError
from model.names import WORD
from model.rationales import (
    RationaleReview,
    auprc,
    baseline_scores,
    iou_matches,
    plausibility,
    read_rationales,
    runs,
    token_f1,
    token_plausibility,
    token_scores,
    top_k,
)
from model.sentences import Span
from tests.conftest import write_archive


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
    other = write_archive(tmp_path / "other.tar.gz", {"movies/docs/negR_000.txt": "a line .\n"})
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


def test_token_plausibility_of_a_hand_made_review():
    review = hand_made()  # annotated tokens 2, 3 and 6 of 8: k = 3
    assert review.annotated_tokens() == {2, 3, 6}
    best = token_plausibility([review], [[0, 0, 0.9, 0.8, 0, 0, 0.7, 0]])
    assert best == {"auprc": pytest.approx(1.0), "token_f1": pytest.approx(1.0), "iou_f1": pytest.approx(1.0)}
    # tokens 3, 4 and 6 chosen: runs (3, 5) and (6, 7); 2 of 3 annotated (F1 2/3); (3, 5) against (2, 4) has
    # IOU 1/3, no match, (6, 7) matches: precision 1/2, recall 1/2. AUPRC by the trapezoids between the
    # (recall, precision) points (1, 3/8), (2/3, 2/3), (1/3, 1/2), (1/3, 1), (0, 1): 25/144 + 28/144 + 0 + 48/144
    shifted = token_plausibility([review], [[0, 0, 0, 0.9, 0.8, 0, 0.7, 0]])
    assert shifted["token_f1"] == pytest.approx(2 / 3)
    assert shifted["iou_f1"] == pytest.approx(0.5)
    assert shifted["auprc"] == pytest.approx(101 / 144)
    with pytest.raises(ValueError, match="posR_000: 7 token scores for its 8 tokens"):
        token_plausibility([review], [[0.0] * 7])


def test_runs_and_words_into_tokens():
    assert runs([1, 2, 3, 6, 8, 9]) == [(1, 4), (6, 7), (8, 10)] and runs([]) == []
    review = RationaleReview("negR_000", "negative", "a well-made movie", [Span(0, 17, "a well-made movie")], [(1, 2)])
    words = [(0, 1, 0.0), (2, 6, 0.5), (6, 7, 0.125), (7, 11, 0.25), (12, 17, -1.0)]  # a, well, -, made, movie
    assert token_scores(review, words) == [0.0, 0.875, -1.0]


def test_the_token_baselines_on_the_real_reviews(tiny_eraser):
    reviews = read_rationales(tiny_eraser)
    figures = baseline_scores(reviews, seed=42, level=WORD)
    for name in ("auprc", "token_f1", "iou_f1"):
        assert 0 <= figures["random"][name]["mean"] <= 1 and 0 <= figures["position"][name] <= 1
    # random tokens hit the annotated ones about as often as they make up the text
    share = sum(len(r.annotated_tokens()) for r in reviews) / sum(len(r.token_spans()) for r in reviews)
    assert figures["random"]["token_f1"]["mean"] == pytest.approx(share, abs=0.05)
