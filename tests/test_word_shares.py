"""BERT's word shares (model.word_shares): each sentence's share of the served log-odds split over its
words by integrated gradients, on a real MiniLM (its sentence student trained a few steps on real
reviews, its whole-text teacher from the package)."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from app.web.whatif import log_odds, logit
from model.bert import BertClassifier
from model.calibration import Calibration
from model.config import MINILM, PER_SENTENCE, PER_TEXT, BertConfig
from model.devices import resolve_device
from model.sentences import split_sentences
from model.served import OneSentenceRouter
from model.word_shares import WORD, word_shares
from tests.test_models import sample

REVIEW = (
    "I expected a dull costume drama. Instead the acting is superb and the score soars. "
    "The middle hour drags badly. Don't miss the Tarantinoesque finale!"
)
ONE_LINE = "A wonderful, moving film with brilliant acting."
# |Σ word shares − the sentence's share| at the default 32 steps: worst 0.0011 over the study's 37 real
# sentences, at the served bfloat16 arithmetic's own floor (docs/studies/word-shares.md); 0.01 leaves room
RESIDUAL = 0.01


@pytest.fixture(scope="module")
def served(real_reviews):
    """A sentence student fine-tuned two steps on 16 real reviews, with an offset (per sentence or text) and a temperature,
    handing its texts of one sentence to a whole-text MiniLM teacher."""
    cpu = resolve_device("cpu")
    config = BertConfig(
        base_model=MINILM, epochs=1, batch_size=8, max_length=64, seed=0, pooling="sentences", length_exponent=-0.5
    )
    student = BertClassifier.train(*sample(real_reviews, "train", 8), config, cpu, progress=False)
    teacher = BertClassifier.pretrained(BertConfig(base_model=MINILM, max_length=64, pooling="cls", seed=2), cpu)
    with torch.no_grad():  # an untrained head reads every text near even odds: give its scores some spread
        teacher.model.classifier.weight.mul_(20)
    teacher.calibration = Calibration(temperature=1.3, offset=0.3, offset_per=PER_TEXT)
    student.calibration = Calibration(temperature=0.7, offset=-0.4)
    return OneSentenceRouter(student, teacher)


def calibrated_per(served: OneSentenceRouter, offset_per: str) -> OneSentenceRouter:
    """``served`` with its student's offset added per ``offset_per``."""
    served.own.calibration = replace(served.own.calibration, offset_per=offset_per)
    return served


@pytest.mark.slow
@pytest.mark.parametrize("offset_per", [PER_SENTENCE, PER_TEXT])
def test_each_sentences_word_shares_add_up_to_its_share_of_the_served_log_odds(served, offset_per):
    calibrated_per(served, offset_per)
    spans = split_sentences(REVIEW)
    sentences = word_shares(served, REVIEW)
    # the sentences' shares as the what-if computes them: each sentence alone, less the empty text, times the length factor
    odds = log_odds(served.proba_of_sentences([[], *([s.text] for s in spans)]))
    factor = len(spans) ** -0.5
    assert [s.contribution for s in sentences] == pytest.approx((odds[1:] - odds[0]) * factor, abs=1e-4)
    for sentence in sentences:
        assert sentence.residual == pytest.approx(abs(math.fsum(w.share for w in sentence.words) - sentence.contribution))
        assert sentence.residual < RESIDUAL
    # words → sentences → verdict: the start plus every word's share is the served log-odds
    total = odds[0] + math.fsum(w.share for s in sentences for w in s.words)
    assert total == pytest.approx(log_odds(served.predict_proba([REVIEW]))[0], abs=RESIDUAL * len(spans))
    # every character of the text but its spaces is in exactly one word, within its sentence
    for span, sentence in zip(spans, sentences):
        assert "".join(w.text for w in sentence.words) == "".join(span.text.split())
        assert all(REVIEW[w.start : w.end] == w.text and span.start <= w.start < w.end <= span.end for w in sentence.words)


@pytest.mark.slow
def test_a_word_of_several_pieces_gets_one_share(served):
    sentence = "Don't miss the Tarantinoesque finale!"
    pieces = served.own.tokenizer.tokenize(sentence)
    assert len(pieces) > len(sentence.split()) + 2  # "don ' t", "tara ##nti ##no ##es ##que", "!"
    [*_, last] = word_shares(served, f"A first sentence. {sentence}")
    assert [w.text for w in last.words] == ["Don't", "miss", "the", "Tarantinoesque", "finale", "!"]
    assert last.residual < RESIDUAL


@pytest.mark.slow
def test_the_teacher_splits_a_text_of_one_sentence_over_its_words(served):
    calibrated_per(served, PER_SENTENCE)
    [sentence] = word_shares(served, ONE_LINE)
    p_positive = served.one_sentence_reader.predict_proba([ONE_LINE])[0, 1]
    assert served.predict_proba([ONE_LINE])[0, 1] == pytest.approx(p_positive)  # the teacher reads it for the site
    teacher_odds = logit(float(p_positive))
    assert sentence.contribution == pytest.approx(teacher_odds, abs=1e-4)
    assert [w.text for w in sentence.words] == ["A", "wonderful", ",", "moving", "film", "with", "brilliant", "acting", "."]
    assert sentence.residual < RESIDUAL
    assert not np.allclose([w.share for w in sentence.words], sentence.words[0].share)  # not an even split
    # a whole-text model does not read a longer text as a sum of sentences: no shares, as the what-if has none
    assert word_shares(served.one_sentence_reader, REVIEW) is None
    assert word_shares(served, "") == []  # no sentence, no words


def test_words_are_runs_of_letters_or_of_punctuation():
    text = "It's \u201cgreat\u201d -- really!!! 10/10, rock\u2019n\u2019roll"
    words = ["It's", "\u201c", "great", "\u201d", "--", "really", "!!!", "10", "/", "10", ",", "rock\u2019n\u2019roll"]
    assert WORD.findall(text) == words
