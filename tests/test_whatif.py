"""What if: each sentence's exact share of the served BERT's log-odds, and the fewest sentences whose
removal flips a verdict, on real models (MiniLM from its package, NB-SVM trained on real reviews)."""

import asyncio
import math

import numpy as np
import pytest

from app.settings import Settings
from app.web.analysis import analyzer_of
from app.web.whatif import log_odds, text_without
from model.bert import BertClassifier
from model.calibration import Calibration
from model.config import MINILM, PER_SENTENCE, PER_TEXT, BertConfig, NbsvmConfig
from model.devices import resolve_device
from model.nbsvm import NbsvmClassifier
from model.sentences import Span
from model.served import OneSentenceRouter
from tests.test_models import sample
from tests.web_fixtures import web_database  # noqa: F401

REVIEW = (
    "I expected a dull costume drama. Instead the acting is superb and the score soars. "
    "The middle hour drags badly. The script is clumsy and the jokes fall flat. "
    "Still, the final scene is beautiful and I loved every minute of it. I would watch it again."
)
ONE_LINE = "A wonderful, moving film with brilliant acting."


def served_models(real_reviews, offset_per: str = PER_SENTENCE) -> dict:
    """Both models as a distill build serves them: a sentence-pooled MiniLM with an offset (per sentence,
    or per text), a temperature and a length factor, handing texts of one sentence to a whole-text MiniLM;
    NB-SVM trained on 200 real reviews."""
    import torch

    cpu = resolve_device("cpu")
    teacher = BertClassifier.pretrained(BertConfig(base_model=MINILM, max_length=64, pooling="cls", seed=2), cpu)
    student = BertClassifier.pretrained(
        BertConfig(base_model=MINILM, max_length=64, pooling="sentences", length_exponent=-0.5, seed=1), cpu
    )
    with torch.no_grad():  # an untrained head reads every sentence near 0: give its scores some spread
        student.model.classifier.weight.mul_(40)
    student.calibration = Calibration(temperature=0.7, offset=-0.4, offset_per=offset_per)
    nbsvm = NbsvmClassifier.train(*sample(real_reviews, "train", 100), NbsvmConfig(nbsvm_c=0.1, seed=0))
    return {"nbsvm": nbsvm, "bert": OneSentenceRouter(student, teacher)}


@pytest.fixture(scope="module", params=[PER_SENTENCE, PER_TEXT])
def served(request, real_reviews):
    models = served_models(real_reviews, request.param)
    return models, analyzer_of(models, Settings(lime_samples=32, batch_window_ms=0))


def analyze(analyzer, texts):
    async def run():
        try:
            return [analysis.model_dump(exclude_unset=True) for analysis in await analyzer.analyze(texts, True)]
        finally:
            await analyzer.stop()

    return asyncio.run(run())


def spans_of(result) -> list[Span]:
    return [Span(s["start"], s["end"], s["text"]) for s in result["sentences"]]


def test_the_sentences_shares_add_up_to_the_served_log_odds(served):
    models, analyzer = served
    [result] = analyze(analyzer, [REVIEW])
    bert, p = result["explanations"]["bert"], result["predictions"]["bert"]["p_positive"]
    shares = [s["contributions"]["bert"] for s in result["sentences"]]
    assert bert["exact"] and len(shares) == 6
    assert bert["start"] + math.fsum(shares) == pytest.approx(math.log(p / (1 - p)), abs=1e-3)
    assert bert["log_odds"] == pytest.approx(math.log(p / (1 - p)), abs=1e-3)
    # the model's own reading of the text, in a call that reads the same sentences: the same sum
    singles = [(), *((s["text"],) for s in result["sentences"])]
    own, alone = log_odds(models["bert"].predict_proba([REVIEW])), log_odds(models["bert"].proba_of_sentences(singles))
    assert own[0] == pytest.approx(bert["start"] + math.fsum(shares), abs=1e-3)
    assert bert["start"] == pytest.approx(alone[0], abs=1e-6)  # the empty text
    assert max(map(abs, shares)) > 0.5  # shares that matter, not zeros
    assert "contributions" not in result["sentences"][0] or "nbsvm" not in result["sentences"][0]["contributions"]
    nbsvm = result["explanations"]["nbsvm"]
    assert nbsvm["exact"] is False and "start" not in nbsvm and 0 <= nbsvm["score"] <= 1


def test_a_text_the_teacher_reads_whole_starts_from_even_odds(served):
    models, analyzer = served
    [result] = analyze(analyzer, [ONE_LINE])
    bert, p = result["explanations"]["bert"], result["predictions"]["bert"]["p_positive"]
    assert result["predictions"]["bert"]["read_by"] == "teacher" and bert["exact"] and bert["start"] == 0
    [sentence] = result["sentences"]
    teacher = log_odds(models["bert"].one_sentence_reader.predict_proba([ONE_LINE]))[0]
    assert sentence["contributions"]["bert"] == pytest.approx(math.log(p / (1 - p)), abs=1e-3)
    assert sentence["contributions"]["bert"] == pytest.approx(teacher, abs=2e-2)  # another call, another batch
    assert bert["flip"] is None  # without its only sentence there is no review left


def test_the_flip_set_flips_and_one_sentence_fewer_does_not(served):
    models, analyzer = served
    texts = [REVIEW, REVIEW.replace("superb", "wooden").replace("loved", "hated")]
    flipped = 0
    results = analyze(analyzer, texts)
    for text, result in zip(texts, results):
        spans = spans_of(result)
        for name, model in models.items():
            flip, p = result["explanations"][name]["flip"], result["predictions"][name]["p_positive"]
            if flip is None:
                continue
            flipped += 1
            positive = p >= 0.5
            without = text_without(text, spans, set(flip["sentences"]))
            p_without = model.predict_proba([without])[0, 1]
            assert (p_without >= 0.5) != positive and p_without == pytest.approx(flip["p_positive"], abs=0.02)
            if name == "bert":  # exact: the fewest; keeping the weakest of them back does not flip it
                shares = {i: s["contributions"]["bert"] for i, s in enumerate(result["sentences"])}
                fewer = set(flip["sentences"]) - {min(flip["sentences"], key=lambda i: abs(shares[i]))}
                p_fewer = model.predict_proba([text_without(text, spans, fewer)])[0, 1]
                assert (p_fewer >= 0.5) == positive
                assert all((shares[i] > 0) == positive for i in flip["sentences"])
    assert flipped >= 2 and any(r["explanations"]["bert"]["flip"] for r in results)


def test_text_without_cuts_the_sentences_out():
    text = "One. Two two. Three!"
    spans = [Span(0, 4, "One."), Span(5, 13, "Two two."), Span(14, 20, "Three!")]
    assert text_without(text, spans, {1}) == "One. Three!"
    assert text_without(text, spans, {0, 2}) == "Two two."
    assert np.allclose(log_odds(np.array([[0.25, 0.75]])), [math.log(3)])


def test_the_api_answers_the_shares_and_flips_as_documented(served, web_database):
    from fastapi.testclient import TestClient

    from app.web.main import create_app
    from tests.web_fixtures import use_analyzer

    models, _ = served
    app = create_app(Settings(database_url=web_database, lime_samples=32, rate_limit=""))
    use_analyzer(app, analyzer_of(models, Settings(lime_samples=32)))
    with TestClient(app) as client:
        response = client.post("/api/predict", json={"texts": [REVIEW, ONE_LINE], "explain": True})
    assert response.status_code == 200, response.text
    for result in response.json()["results"]:
        bert, nbsvm, p = result["explanations"]["bert"], result["explanations"]["nbsvm"], result["predictions"]["bert"]["p_positive"]
        shares = [s["contributions"]["bert"] for s in result["sentences"]]
        assert bert["exact"] is True and bert["start"] + math.fsum(shares) == pytest.approx(math.log(p / (1 - p)), abs=1e-3)
        assert nbsvm["exact"] is False and all("nbsvm" not in s["contributions"] for s in result["sentences"])
        for flip in (bert.get("flip"), nbsvm.get("flip")):
            assert flip is None or (set(flip) == {"sentences", "p_positive"} and flip["sentences"])
