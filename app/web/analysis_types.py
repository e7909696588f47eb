"""A review's analysis as one typed, immutable value: each model's prediction, the sentences with their
weights, each model's explanation with its "what if", and what a model still pending says.

``app.web.analysis`` makes one per text where the reading is computed (``analysis_of``); the API answers
it (its JSON schema and the OpenAPI document are generated from these types), the /analyze page shows it
and ``app.web.store`` stores it. Nothing edits one: a prediction's ``correct`` is set on a copy.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_serializer

from model.names import MODELS, NEGATIVE, POSITIVE

Label = Literal[POSITIVE, NEGATIVE]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class PredictedLabel(Frozen):
    label: Label
    p_positive: float = Field(ge=0, le=1, description="Probability of the positive class.")


class ModelPrediction(PredictedLabel):
    correct: bool | None = Field(
        None, description="POST /api/reviews with a `label`: whether the prediction matches it."
    )
    read_by: Literal["teacher", "student"] | None = Field(
        None, description="BERT of a distill build: the network that read the text, the teacher for a text of one "
        "sentence (`--set one_sentence_reader=teacher`, the default), else the student (the served MiniLM)."
    )  # fmt: skip


class PerModel(Frozen):
    """One value per model (a required field each), in the order of ``MODELS``."""

    def by_model(self) -> dict:
        return {model: getattr(self, model) for model in MODELS}

    def analysed(self) -> dict:
        """The models' values but those of the models still pending."""
        return {model: value for model, value in self.by_model().items() if not isinstance(value, PendingModel)}


def per_model(name: str, value: type) -> type[PerModel]:
    """A schema with one required field of type ``value`` per model key."""
    return create_model(name, __base__=PerModel, **{model: (value, ...) for model in MODELS})


class PendingModel(Frozen):
    """A model the build has not made ready yet (``textflix up`` serves the site while it builds): it answers
    once the build has trained it and read the catalogue with it, without a restart."""

    pending: Literal[True] = True
    step: str | None = Field(
        description="The build step running now (`pseudo_label`, `bert`, `explain_bert`, …); null when the build "
        "is not running (it stopped or failed: `textflix up` resumes it)."
    )
    eta_s: float | None = Field(description="The build's estimate of the seconds until the model is ready; null when it has none.")

    @model_serializer
    def _always_whole(self):  # no return type: the schema stays that of the fields
        """All three fields, null ones too: ``POST /api/predict`` leaves the other null fields out."""
        return {"pending": self.pending, "step": self.step, "eta_s": self.eta_s}


Predictions = per_model("Predictions", ModelPrediction | PendingModel)
ModelWeights = per_model("ModelWeights", float | None)


class WordShare(Frozen):
    text: str
    start: int = Field(description="Character offset of the word in the text.")
    end: int
    share: float = Field(
        description="The word's part of its sentence's contribution, in log-odds of positive (integrated gradients; "
        "an equal part of what the sentence without its words scores is in each)."
    )


class AnalyzedSentence(Frozen):
    text: str
    start: int = Field(description="Character offset of the sentence in the text.")
    end: int
    weights: ModelWeights = Field(description="LIME weight per model, signed toward positive; null for a pending model.")
    contributions: dict[str, float] | None = Field(
        None, description="Per model whose explanation is `exact`: the sentence's share of its log-odds of positive; "
        "the model's `start` and these add up to log(p / (1 − p)).",
    )
    words: dict[str, list[WordShare]] | None = Field(
        None, description="With `words`: per model whose explanation is exact (BERT), the sentence's words in order, "
        "whose shares add up to its `contributions` entry (up to the residual the docs state).",
    )


class ExplanationQuality(Frozen):
    """How far a sentence explanation can be trusted (``model.quality``). Faithfulness figures are
    drops in the predicted class's probability; null where undefined (a one-sentence text)."""

    target: str | None = Field(None, description="What LIME explained: `log_odds` or `probability` of positive.")
    stability: float | None = Field(
        None, description="Spearman rank agreement of the weights of two LIME runs (seeds)."
    )
    top_k: int | None = Field(None, description="k of the `*_top` figures: 20 % of the sentences, at least 1.")
    comprehensiveness: float | None = Field(
        None, description="Drop when the top sentence is removed (higher is better)."
    )
    sufficiency: float | None = Field(None, description="Drop when only the top sentence is kept (lower is better).")
    random_comprehensiveness: float | None = Field(None, description="The same for a random sentence (exact mean).")
    random_sufficiency: float | None = Field(None, description="The same for a random sentence (exact mean).")
    normalised_comprehensiveness: float | None = Field(
        None, description="Comprehensiveness at k = 1 between the worst (0) and best (1) single sentence."
    )
    normalised_sufficiency: float | None = Field(
        None, description="Sufficiency at k = 1 between the worst (0) and best (1) single sentence."
    )
    comprehensiveness_top: float | None = Field(None, description="Drop when the top k sentences are removed.")
    sufficiency_top: float | None = Field(None, description="Drop when only the top k sentences are kept.")
    random_comprehensiveness_top: float | None = Field(
        None, description="The same for k random sentences (mean of draws)."
    )
    random_sufficiency_top: float | None = Field(None, description="The same for k random sentences (mean of draws).")


class LimeFit(Frozen):
    samples: int = Field(description="LIME samples drawn per run.")
    intercept: float
    score: float = Field(description="R² of LIME's local linear model.")


class ExplanationInfo(LimeFit):
    quality: ExplanationQuality | None = Field(None, description="Sentence level: stability and faithfulness.")
    weak: bool = Field(
        False,
        description="Shown as weak: R² under 0.2, stability under 0.5, or the top sentence matters no more "
        "than a random one.",
    )
    reasons: list[str] = Field([], description="Why it is weak, in plain words; empty when it is not.")
    reading: str | None = Field(None, description="The fit in plain words.")


class Flip(Frozen):
    sentences: list[int] = Field(description="The fewest sentences (indices into `sentences`) whose removal flips the verdict.")
    p_positive: float = Field(ge=0, le=1, description="The model's probability of positive for the text without them.")


class AnalysisExplanation(ExplanationInfo):
    exact: bool | None = Field(
        None, description="True when the sentences' `contributions` are the model's own arithmetic (the served BERT: "
        "its log-odds are the sum of its sentences' scores; a text of one sentence read whole by the teacher), false "
        "when the weights are LIME's fit (`score`, its R², says how well it fits).",
    )
    start: float | None = Field(
        None, description="When `exact`: where the log-odds start, the model's reading of the empty text (0: even odds)."
    )
    log_odds: float | None = Field(None, description="When `exact`: `start` + the contributions, log(p / (1 − p)).")
    flip: Flip | None = Field(
        None, description="The fewest sentences whose removal flips the verdict, verified by the model; left out "
        "when removing none of the ones tried (all but one sentence at most) flips it.",
    )


ModelExplanations = per_model("ModelExplanations", AnalysisExplanation | PendingModel)


class Analysis(Frozen):
    text: str | None = Field(
        None,
        description="With `explain`: the text as analysed, cleaned as the catalogue's reviews are (Windows-1252 "
        "characters sent as C1 controls mapped to the characters meant, other control characters dropped, `<br />` "
        "a line break, the ends trimmed); the sentences' `start` and `end` are offsets into it.",
    )
    predictions: Predictions
    sentences: list[AnalyzedSentence] | None = Field(None, description="With `explain`: the sentences, in order.")
    explanations: ModelExplanations | None = None

    def analysed_predictions(self) -> dict[str, "ModelPrediction"]:
        """The predictions of the models that analysed the text (not those pending)."""
        return self.predictions.analysed()

    def analysed_explanations(self) -> dict[str, "AnalysisExplanation"]:
        """The explanations of the models that analysed the text (none without ``explain``)."""
        return self.explanations.analysed() if self.explanations is not None else {}
