"""Pydantic schemas of the JSON API (requests, answers, errors), apart from the ORM models; an analysis's
answer is its own type (``app.web.analysis_types.Analysis``), which the answers here extend or list.

Request bodies are strict: unknown fields, and values of the wrong JSON type, are
refused (a string is not taken for a boolean, a number not for a string). The limits
that depend on the settings (text length, number of texts, page size) are checked by the
routes and written into the OpenAPI schema at start-up (``app.web.api.document_limits``).
"""

from itertools import islice
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.web.analysis_types import Analysis, ExplanationInfo, Label, LimeFit, PredictedLabel, WordShare

# A posted review, as posted: the routes check its length, then clean it as the archive's are when they are
# read (``app.web.limits.posted_text``, ``model.data.clean_text``: the C1 characters mapped through
# Windows-1252, other control characters dropped, ``<br />`` a line break, the ends trimmed), off the event loop.
PostedText = StrictStr
# Unknown fields past this many are refused as one error, not one each (a body of a million keys would
# otherwise make a million errors, while the event loop waits).
MOST_UNKNOWN_FIELDS_NAMED = 20


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _not_too_many_unknown_fields(cls, data):
        if isinstance(data, dict) and len(data) > len(cls.model_fields) + MOST_UNKNOWN_FIELDS_NAMED:
            count = len(data) - sum(name in data for name in cls.model_fields)
            some = list(islice((key for key in data if key not in cls.model_fields), 3))
            raise PydanticCustomError("extra_forbidden", "{count} unknown fields, among them {some}", {"count": count, "some": some})
        return data


class Open(BaseModel):
    """An answer that may carry more fields than are listed."""

    model_config = ConfigDict(extra="allow")


# --- errors ---------------------------------------------------------------------------------


class ErrorItem(BaseModel):
    field: str | None = Field(
        description="The body field (`texts[2]`), parameter, header or `body` at fault; null if none is."
    )
    message: str
    limit: int | None = Field(None, description="The limit that was passed, if any.")
    type: str | None = Field(None, description="Pydantic's error type, for validation errors.")


class ErrorResponse(BaseModel):
    detail: list[ErrorItem]


# --- live analysis --------------------------------------------------------------------------


class PredictRequest(Strict):
    texts: list[PostedText] = Field(
        fail_fast=True,  # a million wrong items make one error, not a million
        description="Review texts, each non-blank (limits: TEXTFLIX_MAX_TEXTS, TEXTFLIX_MAX_TEXT_CHARS), cleaned as "
        "the catalogue's reviews are (control characters, `<br />`).",
        examples=[["A wonderful, moving film. The ending drags a little."]],
    )
    explain: StrictBool = Field(False, description="Also return sentence-level LIME weights (slower).")
    words: StrictBool = Field(
        False, description="With `explain`: also BERT's word shares of each sentence (`sentences[i].words.bert`), "
        "computed by integrated gradients (much slower: about 1.5 CPU s a sentence; docs/api.md); needs `explain`.",
    )


class ReviewRequest(Strict):
    text: PostedText = Field(
        description="The review, non-blank (limit: TEXTFLIX_MAX_TEXT_CHARS), cleaned as the catalogue's reviews "
        "are (control characters, `<br />`).",
        examples=["A wonderful, moving film. The lighthouse scenes are beautifully shot. The ending drags."],
    )
    title_id: StrictStr | None = Field(
        None, description="A catalogue title (e.g. `tt0111161`): the review is stored and shown on its page."
    )
    label: Label | None = Field(None, description="The writer's own label: shown with the review, never counted in accuracy.")


class PredictResponse(BaseModel):
    results: list[Analysis] = Field(description="One result per text, in order.")


class ReviewResult(Analysis):
    stored: bool = Field(description="True when the review was stored (a `title_id` was given).")
    id: int | None = Field(None, description="The stored review's id.")
    url: str | None = Field(None, description="Its page, e.g. /reviews/1234.")
    api_url: str | None = Field(None, description="Its JSON, e.g. /api/reviews/1234.")
    title_id: str | None = None
    label: Label | None = Field(None, description="The gold label given.")


# --- catalogue (GET) ------------------------------------------------------------------------


class Pagination(BaseModel):
    page: int
    per_page: int
    total: int = Field(description="Items on all pages.")
    pages: int


class MovieInfo(Open):
    title_id: str
    title: str
    has_metadata: bool
    year: int | None = None
    runtime_min: int | None = None
    rated: str | None = None
    genres: list[str] = []
    director: str | None = None
    actors: str | None = None
    plot: str | None = None
    imdb_rating: float | None = None


class BarRun(BaseModel):
    level: str = Field(description="Colour class: pos1-pos3 or neg1-neg3 by confidence.")
    count: int


class Tick(BaseModel):
    index: int
    review_id: int
    gold: str | None


class ModelSummary(Open):
    model: str
    name: str
    reviews: int
    scored: int
    positive: int
    negative: int
    positive_share: float | None
    bar: list[BarRun] = Field(description="Reviews ordered by positive probability, as runs of equal colour.")
    labeled: int | None = None
    wrong: int | None = None
    correct: int | None = None
    accuracy: float | None = None
    ticks: list[Tick] | None = Field(None, description="Where the wrong predictions fall in `bar`.")
    user_labeled: int | None = Field(None, description="Reviews whose label came from their writer: not in the accuracy.")
    user_agree: int | None = Field(None, description="Of those, how many the model agrees with.")


class Summary(Open):
    reviews: int
    models: dict[str, ModelSummary]


class CatalogueSummary(Summary):
    titles: int


class TitleCard(MovieInfo):
    reviews: int
    models: dict[str, ModelSummary]


class MovieList(BaseModel):
    sort: str
    summary: CatalogueSummary
    titles: list[TitleCard]
    pagination: Pagination


class StoredPrediction(Open):
    label: Label
    p_positive: float
    confidence: float
    correct: bool | None = Field(None, description="Null when the review has no gold label.")


class StoredSentence(Open):
    position: int
    start: int
    end: int
    text: str
    weights: dict[str, float]
    words: dict[str, list[WordShare]] | None = Field(
        None, description="BERT's words of the sentence with their shares of its contribution, once computed "
        "(POST /api/reviews/{id}/words); null before.",
    )


class ReviewItem(Open):
    id: int
    title_id: str
    source: str = Field(description="`imdb` or `user`.")
    text: str
    gold: Label | None = Field(None, description="The IMDB label; a user's label is `user_label`.")
    user_label: Label | None = Field(None, description="The label the review's writer gave (not counted in accuracy).")
    rating: int | None = None
    predictions: dict[str, StoredPrediction] = {}
    highlights_pending: list[str] = Field(
        [], description="The models whose prediction is in but whose highlights of this review are still being "
        "computed (the build explains the catalogue review by review after its predictions): no sentence weights yet."
    )
    wrong: bool = False
    disagree: bool = False
    sentences: list[StoredSentence] = []


class Highlight(BaseModel):
    review_id: int
    position: int
    text: str
    weight: float


class MovieDetail(BaseModel):
    movie: MovieInfo
    summary: Summary
    highlights: dict[str, list[Highlight]] = Field(description="Most polarised sentence of each review, by label.")
    wrong_reviews: int
    reviews: list[ReviewItem]
    pagination: Pagination


class WordWeightOut(BaseModel):
    word: str
    weight: float


class ExplanationRecord(ExplanationInfo):
    model: str
    level: str


class ReviewWords(BaseModel):
    review_id: int
    url: str
    computed: bool = Field(
        description="Whether the words were computed for this request (the review's first view, or one at the same "
        "time); false when they were read as stored."
    )
    sentences: list[StoredSentence] = Field(description="The review's sentences, each with BERT's `words`.")


class ReviewDetail(BaseModel):
    url: str
    movie: MovieInfo
    review: ReviewItem
    words: list[WordWeightOut] = Field(description="NB-SVM word-level LIME weights, strongest first.")
    explanations: list[ExplanationRecord]


# --- health ---------------------------------------------------------------------------------


class WorkLimits(BaseModel):
    """How much work this server process takes at once, sized from its machine's measured speed."""

    max_work_in_flight: int = Field(description="Model passes of requests larger than small ones it works on at once.")
    small_work_in_flight: int = Field(description="Model passes kept for small requests, which no large one can take.")
    small_request_passes: int = Field(description="The most model passes a request is charged and counts as small.")
    largest_request_passes: int = Field(
        description="The most model passes one request may be charged: what this machine finishes well within "
        "TEXTFLIX_ANALYSIS_TIMEOUT_S, at most max_work_in_flight; a larger explanation gets 422."
    )
    seconds_per_pass: float | None = Field(
        None, description="A model pass's seconds on this machine, timed when the models were loaded."
    )
    largest_request_s: float | None = Field(None, description="About how long the largest request takes here.")


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    database: Literal["ok", "unavailable"]
    models: dict[str, bool]
    models_problem: str | None = None
    device: str | None = None
    work_in_flight: int | None = Field(None, description="Model passes of the analyses under way in this process.")
    limits: WorkLimits | None = None
    batch_window_ms: float
    batching: bool
    host: str = Field(description="The machine (or container) that answered.")
    pid: int = Field(
        description="The server process that answered: with several servers or `--workers`, each process has "
        "its own models, micro-batcher and work in flight."
    )


# --- metrics --------------------------------------------------------------------------------

OLDER_RUN = "absent from a run recorded before it was kept"


class SetMetrics(BaseModel):
    """One model's figures on one set of labelled texts, from the build's evaluate step."""

    n: int = Field(description="Labelled texts in the set.")
    accuracy: float = Field(description="Share of predictions (positive at p ≥ 0.5) that match the labels.")
    majority_baseline: float | None = Field(
        None, description=f"The accuracy of always saying the set's larger class, for accuracy to beat; {OLDER_RUN}."
    )
    balanced_accuracy: float | None = Field(
        None, description=f"The mean of each class's recall (0.5 for a model that always says one class); {OLDER_RUN}."
    )
    macro_f1: float | None = Field(None, description=f"The mean of each class's F1; {OLDER_RUN}.")
    f1: float = Field(description="F1 of the positive class.")
    ece: float = Field(description="Expected calibration error over 10 bins of confidence.")
    confusion: list[list[int]] = Field(description="Rows gold negative, positive; columns predicted the same.")


class LengthMetrics(BaseModel):
    """The evaluation reviews whole and cut to their first 1 to 6 sentences, by band of sentences."""

    bands: list[str] = Field(description="Bands of sentences: 1, 2–3, 4–6, 7+.")
    n: list[int] = Field(description="Texts per band.")
    majority_baseline: list[float | None] | None = Field(None, description=f"Per band; {OLDER_RUN}.")
    accuracy: dict[str, list[float | None]] = Field(description="Per model, per band (null: an empty band).")
    balanced_accuracy: dict[str, list[float | None]] | None = Field(None, description=f"Per model, band; {OLDER_RUN}.")
    macro_f1: dict[str, list[float | None]] | None = Field(None, description=f"Per model, band; {OLDER_RUN}.")


class Metrics(BaseModel):
    run_id: int | None = Field(None, description="The latest build's run; absent before the first build.")
    status: str | None = Field(None, description="`complete`, or `running` while the build goes on.")
    models: dict[str, dict[str, SetMetrics]] = Field(
        description="Per model (`nbsvm`, `bert`, and a distill build's `teacher`), per set: `eval` (the "
        "evaluation reviews), `catalogue`, `sst2` (one-line reviews, when the build had --sst2); empty until "
        "the build's evaluate step."
    )
    lengths: LengthMetrics | None = Field(None, description="Accuracy by length; absent until the evaluate step.")


# --- export ---------------------------------------------------------------------------------


class ExportSentence(BaseModel):
    position: int = Field(description="Order of the sentence in the review, from 0.")
    start: int = Field(description="Character offset of the sentence in the text.")
    end: int
    text: str
    weights: dict[str, float] = Field(
        description="LIME weight per model, signed toward positive, in the space `quality.target` names (log-odds by default)."
    )
    words: dict[str, list[WordShare]] | None = Field(
        None, description="BERT's words with their shares of the sentence's contribution, where computed; null where not."
    )


class ExportRow(BaseModel):
    """One line of GET /api/export.jsonl and `textflix export`: a catalogue review with everything
    the models say of it (``app.web.export``)."""

    id: int
    title_id: str
    title: str | None = Field(description="The movie's title; null when the catalogue has no metadata for it.")
    source: str = Field(description="`imdb` or `user`.")
    gold: Label | None = Field(description="The IMDB label; null for a user review.")
    user_label: Label | None = Field(description="The label a user review's writer gave, if any.")
    rating: int | None = Field(description="IMDB stars, 1-10; null for a user review.")
    text: str
    predictions: dict[str, PredictedLabel] = Field(description="Per model.")
    sentences: list[ExportSentence]
    words: list[WordWeightOut] = Field(description="NB-SVM word-level LIME weights, strongest first.")
    explanations: dict[str, ExplanationInfo] = Field(description="Per model: the sentence-level explanation.")
    word_explanation: LimeFit | None = Field(description="LIME's fit of the NB-SVM word weights.")
