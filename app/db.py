"""Database models and access: SQLite by default, any SQLAlchemy URL works."""

import os
import socket
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    select,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, sessionmaker

from model.curve import LEARNING_CURVE, readable
from model.data import ITEM_ID_CHARS
from model.names import IMDB, MODELS

# SQLite: how long a writer waits for another process's write to finish (build and server alike).
SQLITE_BUSY_TIMEOUT_MS = 30_000


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


class PerModel:
    """A table with a row per model (a key of ``model.names.MODELS``) for each thing it describes."""

    model: Mapped[str] = mapped_column(String(16), primary_key=True)


class Movie(Base):
    __tablename__ = "movies"

    title_id: Mapped[str] = mapped_column(String(ITEM_ID_CHARS), primary_key=True)  # IMDB's title id, or a file's item id
    title: Mapped[str | None] = mapped_column(Text)
    year: Mapped[int | None] = mapped_column(Integer)
    runtime_min: Mapped[int | None] = mapped_column(Integer)
    rated: Mapped[str | None] = mapped_column(String(32))
    genres: Mapped[str | None] = mapped_column(Text)  # "|"-separated
    director: Mapped[str | None] = mapped_column(Text)
    actors: Mapped[str | None] = mapped_column(Text)
    plot: Mapped[str | None] = mapped_column(Text)
    imdb_rating: Mapped[float | None] = mapped_column(Float)

    reviews: Mapped[list["Review"]] = relationship(back_populates="movie")


class Review(Base):
    __tablename__ = "reviews"
    __table_args__ = (Index("ix_reviews_split_title", "split", "title_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    title_id: Mapped[str] = mapped_column(ForeignKey("movies.title_id"), index=True)
    text: Mapped[str] = mapped_column(Text)
    label: Mapped[str | None] = mapped_column(String(8))  # gold label, if known
    rating: Mapped[int | None] = mapped_column(Integer)  # 1-10 stars, IMDB reviews only
    split: Mapped[str] = mapped_column(String(16))  # model.names: TRAIN, CATALOGUE or EVAL
    source: Mapped[str] = mapped_column(String(8), default=IMDB)  # or FILE, USER, ERASER
    source_key: Mapped[str | None] = mapped_column(String(64), unique=True)  # e.g. test/pos/12_8
    word_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    movie: Mapped[Movie] = relationship(back_populates="reviews")
    predictions: Mapped[list["Prediction"]] = relationship(
        back_populates="review", cascade="all, delete-orphan"
    )
    sentences: Mapped[list["Sentence"]] = relationship(
        back_populates="review", cascade="all, delete-orphan", order_by="Sentence.position"
    )
    explanations: Mapped[list["Explanation"]] = relationship(
        back_populates="review", cascade="all, delete-orphan"
    )
    word_weights: Mapped[list["WordWeight"]] = relationship(
        back_populates="review", cascade="all, delete-orphan"
    )


class Prediction(PerModel, Base):
    __tablename__ = "predictions"

    review_id: Mapped[int] = mapped_column(ForeignKey("reviews.id"), primary_key=True)
    label: Mapped[str] = mapped_column(String(8))
    p_positive: Mapped[float] = mapped_column(Float)

    review: Mapped[Review] = relationship(back_populates="predictions")


class Sentence(Base):
    __tablename__ = "sentences"
    __table_args__ = (UniqueConstraint("review_id", "position"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    review_id: Mapped[int] = mapped_column(ForeignKey("reviews.id"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    start: Mapped[int] = mapped_column(Integer)  # character span in Review.text
    end: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)

    review: Mapped[Review] = relationship(back_populates="sentences")
    weights: Mapped[list["SentenceWeight"]] = relationship(
        back_populates="sentence", cascade="all, delete-orphan"
    )
    word_shares: Mapped[list["WordShare"]] = relationship(
        back_populates="sentence", cascade="all, delete-orphan", order_by="WordShare.position"
    )


class SentenceWeight(PerModel, Base):
    """LIME weight of one sentence for one model, signed toward "positive"."""

    __tablename__ = "sentence_weights"

    sentence_id: Mapped[int] = mapped_column(ForeignKey("sentences.id"), primary_key=True)
    weight: Mapped[float] = mapped_column(Float)

    sentence: Mapped[Sentence] = relationship(back_populates="weights")


class WordShare(PerModel, Base):
    """One word of a sentence and its share of the sentence's exact contribution (``model.word_shares``:
    BERT's integrated gradients); a sentence's shares add up to its contribution."""

    __tablename__ = "word_shares"

    sentence_id: Mapped[int] = mapped_column(ForeignKey("sentences.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)  # the word's order in its sentence
    start: Mapped[int] = mapped_column(Integer)  # character span in Review.text
    end: Mapped[int] = mapped_column(Integer)
    share: Mapped[float] = mapped_column(Float)  # of the log-odds of "positive"

    sentence: Mapped[Sentence] = relationship(back_populates="word_shares")


class WordWeight(PerModel, Base):
    """Word-level LIME weight (a word type, all its occurrences), signed toward "positive"."""

    __tablename__ = "word_weights"

    review_id: Mapped[int] = mapped_column(ForeignKey("reviews.id"), primary_key=True)
    word: Mapped[str] = mapped_column(String(128), primary_key=True)
    weight: Mapped[float] = mapped_column(Float)

    review: Mapped[Review] = relationship(back_populates="word_weights")


class Explanation(PerModel, Base):
    """One finished LIME explanation; written in the same transaction as its weights."""

    __tablename__ = "explanations"

    review_id: Mapped[int] = mapped_column(ForeignKey("reviews.id"), primary_key=True)
    level: Mapped[str] = mapped_column(String(8), primary_key=True)  # model.names: SENTENCE or WORD
    samples: Mapped[int] = mapped_column(Integer)
    intercept: Mapped[float] = mapped_column(Float)
    score: Mapped[float] = mapped_column(Float)  # R² of LIME's local linear model
    # model.explain.Quality, sentence level only (null for words, or where undefined)
    target: Mapped[str | None] = mapped_column(String(16))  # log_odds or probability
    stability: Mapped[float | None] = mapped_column(Float)
    top_k: Mapped[int | None] = mapped_column(Integer)
    comprehensiveness: Mapped[float | None] = mapped_column(Float)
    sufficiency: Mapped[float | None] = mapped_column(Float)
    random_comprehensiveness: Mapped[float | None] = mapped_column(Float)
    random_sufficiency: Mapped[float | None] = mapped_column(Float)
    normalised_comprehensiveness: Mapped[float | None] = mapped_column(Float)
    normalised_sufficiency: Mapped[float | None] = mapped_column(Float)
    comprehensiveness_top: Mapped[float | None] = mapped_column(Float)
    sufficiency_top: Mapped[float | None] = mapped_column(Float)
    random_comprehensiveness_top: Mapped[float | None] = mapped_column(Float)
    random_sufficiency_top: Mapped[float | None] = mapped_column(Float)

    review: Mapped[Review] = relationship(back_populates="explanations")


class Evidence(Base):
    """A passage that annotators marked as a reason for a review's sentiment (ERASER's movie reviews,
    ``--rationales``): whitespace tokens [start_token, end_token) of ``Review.text``."""

    __tablename__ = "evidence"

    review_id: Mapped[int] = mapped_column(ForeignKey("reviews.id"), primary_key=True)
    start_token: Mapped[int] = mapped_column(Integer, primary_key=True)
    end_token: Mapped[int] = mapped_column(Integer)


class PseudoLabel(Base):
    """An unlabeled review (``train/unsup``) with the distill recipe's teacher's probability of "positive"."""

    __tablename__ = "pseudo_labels"

    source_key: Mapped[str] = mapped_column(String(64), primary_key=True)  # e.g. train/unsup/123_0
    text: Mapped[str] = mapped_column(Text)
    p_positive: Mapped[float] = mapped_column(Float)


class CatalogueVersion(Base):
    """One row: a number that the database's triggers move whenever movies, reviews,
    predictions or explanations change (migration 0004; ``app.web.catalogue_cache``)."""

    __tablename__ = "catalogue_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class Run(Base):
    """A pipeline run: its configuration, the steps it finished, metrics and timings."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    status: Mapped[str] = mapped_column(String(16), default="running")  # running | complete
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    steps: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # name -> {seconds, ...}
    counts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # the step running now: {"step", "doing", "builder" (``this_process``), "steps" (every step of this build,
    # in order), and as it goes "done", "total", "unit", "eta_s" (the running step's seconds left, estimated
    # from its rate so far) and "ready_in_s" ({model: estimated seconds until its predict step is done})};
    # None between steps. Deferred, read only while a build runs: a server may serve a database built
    # before migration 0005.
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSON, deferred=True)

    def ready_models(self) -> list[str]:
        """The models whose catalogue predictions are all in, which the site shows (``models_ready``)."""
        return models_ready(self.steps or {})

    def record(self) -> dict:
        """The run as plain JSON-ready data (``textflix report --json``, /about)."""
        config = self.config or {}
        return {
            "run_id": self.id,
            "status": self.status,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "base_model": config.get("base_model"),
            "seed": config.get("seed"),
            "config": config,
            "counts": self.counts or {},
            "metrics": readable_metrics(self.metrics or {}),
            # in the order the steps finished, which is the pipeline's order
            "timings": {step: info.get("seconds") for step, info in (self.steps or {}).items()},
            # what each step recorded besides its time: checkpoints, amounts, seeds, the temperature
            "steps": self.steps or {},
        }


def predict_step(model: str) -> str:
    """The name of the build step that scores the catalogue with ``model``: once it is done, the site shows
    that model's predictions everywhere (``models_ready``)."""
    return f"predict_{model}"


def explain_step(model: str) -> str:
    """The name of the build step that explains the catalogue's reviews with ``model``, committing each
    review's highlights as it goes; once it is done, every review shows them (``models_explained``)."""
    return f"explain_{model}"


def models_explained(steps: dict) -> list[str]:
    """The models (in ``MODELS`` order) whose explain step a run record's ``steps`` lists; every model
    for a database built before the steps were per model (one ``explain`` step for all)."""
    return [model for model in MODELS if explain_step(model) in steps or "explain" in steps]


def models_ready(steps: dict) -> list[str]:
    """The models (in ``MODELS`` order) whose predictions of the catalogue a run record's ``steps`` lists as
    stored (their predict step, the one ``predict`` step of older builds, or their explain step, which
    comes after it): the models the site shows, their highlights as they are explained."""
    explained = models_explained(steps)
    return [model for model in MODELS if predict_step(model) in steps or "predict" in steps or model in explained]


def this_process() -> dict:
    """This process, as a run's progress names the build that wrote it (``process_gone`` looks it up)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": psutil.Process().create_time()}


def process_gone(named: dict) -> bool:
    """Whether the process that ``this_process`` gave as ``named`` has ended: on this machine, no process
    has its pid and start time any more, or only its zombie is left. False when that cannot be told: it
    ran on another machine, or the progress was written before builds named themselves."""
    if named.get("host") != socket.gethostname() or "pid" not in named:
        return False
    try:
        process = psutil.Process(named["pid"])
        return process.create_time() != named.get("started") or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False


def readable_metrics(metrics: dict) -> dict:
    """``metrics`` with a learning curve in the current format, whenever it was recorded."""
    if LEARNING_CURVE not in metrics:
        return metrics
    return {**metrics, LEARNING_CURVE: readable(metrics[LEARNING_CURVE])}


def sqlite_path(url: str) -> Path | None:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        return Path(parsed.database)
    return None


def database_problem(url: str) -> str | None:
    """Why the database at ``url`` cannot be read, in one sentence, or None when it can."""
    path = sqlite_path(url)
    if path is not None and not path.exists():
        return f"No database at {path}: run `textflix build` to create it."
    return None


def latest_run(session) -> "Run | None":
    """The newest pipeline run record, or None before the first build."""
    return session.scalars(select(Run).order_by(Run.id.desc()).limit(1)).first()


def display_url(url: str) -> str:
    """The database URL without its password, for messages and logs."""
    return make_url(url).render_as_string(hide_password=True)


def make_engine(url: str) -> Engine:
    """The engine for ``url``, for the build and the server alike: every engine setting lives here."""
    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    # pool_pre_ping: a pooled connection that died (the database restarted, a backend was
    # killed) is replaced on checkout instead of failing the next request.
    engine = create_engine(url, pool_pre_ping=True)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def analyze(engine: Engine) -> None:
    """Refresh the query planner's statistics of every table (``ANALYZE``). SQLite keeps none
    until asked, and without them it reads a page's 20 reviews by id through the index of
    every catalogue review (3 ms a query at 25,000 reviews instead of 0.2)."""
    with engine.begin() as connection:
        connection.exec_driver_sql("ANALYZE")


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()


@contextmanager
def session_scope(engine: Engine):
    """A session that commits on success and rolls back on any error."""
    session = sessionmaker(engine, expire_on_commit=False)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def migrate(engine: Engine) -> None:
    """Create or upgrade the schema to the newest Alembic revision."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
