"""What the build has made ready for the site, read from the run record a few times a minute.

``textflix up`` serves the site from the data step on while the build goes on in the background. A model
is shown in two stages: its predictions once its predict step is in the run record (``app.db.models_ready``:
the model is *ready*), then its highlights review by review as its explain step commits them, until that
step is in the run record too (``app.db.models_explained``: the model is *explained*). The server keeps
one ``BuildWatch``: ``refresh`` re-reads the latest run record (done by the analyzer's watch task, every
``build_poll_s``), and the pages and the API read its ``state``, a ``BuildState``, without touching the
database: which models are shown, and the corpus the build read (what the pages call its items). ``pending_line`` says in one sentence why a model is not shown yet, ``highlights_line`` that a
shown model's highlights are still being computed; ``pending_entry`` is what the API answers in a pending
model's place.
"""

import logging
import math
import threading
from dataclasses import dataclass, field

from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.db import explain_step, latest_run, models_explained, models_ready, predict_step, process_gone
from model.names import DISPLAY_NAMES, IMDB_CORPUS, MAIN_MODEL, MODELS

log = logging.getLogger("textflix")

# What a running step is doing, as the pending line says it ("BERT is still learning … — teacher's labels 47 %");
# the line is about the model whose steps run (the first pending one), so a model's own steps need no name.
STEP_NOUNS = {
    "data": "reading the reviews",
    "nbsvm": "training",
    "teacher": "the teacher's training",
    "pseudo_label": "teacher's labels",
    "bert": "training",
    "calibrate": "calibration",
    **{predict_step(model): "predictions of the catalogue" for model in MODELS},
    **{explain_step(model): "explanations of the catalogue" for model in MODELS},
}
RESUME = "`textflix up` (or `textflix build`) resumes it where it stopped"


@dataclass(frozen=True)
class BuildState:
    """The latest run record as the site needs it: which models are ready (their predictions shown) and
    explained (their highlights all in), and what the build is doing."""

    ready: tuple[str, ...] = MODELS  # no run record: the models of the models folder, as before per-model steps
    explained: tuple[str, ...] = MODELS
    recorded: bool = False  # whether there is a run record
    status: str = "complete"
    steps: dict = field(default_factory=dict)  # the finished steps: name -> {seconds, ...}
    progress: dict | None = None  # the running step (``app.db.Run.progress``)
    train_size: int | None = None
    stopped: bool = False  # the build's process has ended before the run was complete
    # the corpus the build read: IMDB, or the name of the user's file (a run recorded before builds read such
    # files, or none yet: IMDB)
    corpus: str = IMDB_CORPUS

    @property
    def pending(self) -> tuple[str, ...]:
        return tuple(model for model in MODELS if model not in self.ready)

    @property
    def explaining(self) -> tuple[str, ...]:
        """The models shown whose highlights are not all in: the reviews they have not explained show their
        prediction alone."""
        return tuple(model for model in self.ready if model not in self.explained)

    @property
    def main_model(self) -> str:
        """The model the pages show when they show one: the served BERT once it is ready, else the one that is."""
        if MAIN_MODEL in self.ready or not self.ready:
            return MAIN_MODEL
        return self.ready[0]

    @property
    def failed(self) -> str | None:
        return (self.progress or {}).get("failed")

    @property
    def running_step(self) -> str | None:
        return None if self.stopped or self.failed else (self.progress or {}).get("step")


def read_build_state(session: Session) -> BuildState:
    """The ``BuildState`` of the latest run record (every model ready when there is none)."""
    run = latest_run(session)
    if run is None:
        return BuildState()
    progress = None
    if run.status != "complete":
        try:  # deferred: a database built before migration 0005 has no progress column
            progress = run.progress
        except SQLAlchemyError:
            session.rollback()
    return BuildState(
        ready=tuple(models_ready(run.steps or {})),
        explained=tuple(models_explained(run.steps or {})),
        recorded=True,
        status=run.status,
        steps=dict(run.steps or {}),
        progress=progress,
        train_size=(run.config or {}).get("train_size") or (run.counts or {}).get("train"),
        stopped=run.status != "complete" and bool(progress) and process_gone(progress.get("builder") or {}),
        corpus=(run.counts or {}).get("corpus", IMDB_CORPUS),
    )


class BuildWatch:
    """The server's view of the build, refreshed by ``refresh`` (any thread) and read by every request."""

    def __init__(self):
        self.state = BuildState()
        self._lock = threading.Lock()

    def refresh(self, engine: Engine | None) -> BuildState:
        """Re-read the run record (none while there is no database: the state stays as it was)."""
        if engine is None:
            return self.state
        try:
            with self._lock, Session(engine) as session:
                self.state = read_build_state(session)
        except SQLAlchemyError as error:  # a database being created, or locked for longer than the busy timeout
            log.warning("The run record could not be read (%s); the site shows what it showed.", error)
        return self.state


def eta_of(state: BuildState, model: str) -> float | None:
    """Seconds until ``model`` is ready, as the build estimates them; None when it has no estimate."""
    if state.running_step is None:
        return None
    eta = ((state.progress or {}).get("ready_in_s") or {}).get(model)
    return float(eta) if isinstance(eta, int | float) and math.isfinite(eta) else None


def pending_entry(state: BuildState, model: str) -> dict:
    """What the API answers for a model that is not ready: ``{"pending": true, "step", "eta_s"}``."""
    return {"pending": True, "step": state.running_step, "eta_s": eta_of(state, model)}


def doing_now(state: BuildState) -> str:
    """The running step in a few words, with its share done when the build counts it ("teacher's labels 47 %")."""
    progress = state.progress or {}
    step = progress.get("step", "")
    words = STEP_NOUNS.get(step) or progress.get("doing") or f"the {step} step"
    if progress.get("total"):
        words += f" {math.floor(100 * progress.get('done', 0) / progress['total'])} %"
    return words


def minutes(seconds: float) -> str:
    """A time left as the pending line says it: "about a minute", "about 12 minutes", "about 3 hours"."""
    if seconds < 90:
        return "about a minute"
    if seconds < 2 * 3600:
        return f"about {round(seconds / 60)} minutes"
    return f"about {round(seconds / 3600)} hours"


def pending_line(state: BuildState) -> str | None:
    """The one line a page shows while a model is not ready (the served BERT, or with none ready, the one the
    build makes first); None when all are."""
    if not state.pending:
        return None
    model = MAIN_MODEL if MAIN_MODEL in state.pending and state.ready else state.pending[0]
    name = DISPLAY_NAMES[model]
    shown = f"; the pages show {DISPLAY_NAMES[state.main_model]}'s reading" if state.ready else ""
    if state.failed:
        return (
            f"{name} is not ready: the build's {state.progress.get('step')} step failed ({state.failed.rstrip('.')})"
            f"{shown}. {RESUME[0].upper()}{RESUME[1:]}."
        )
    if state.stopped or (state.status == "complete" and state.recorded):
        why = "the build stopped before it was ready" if state.stopped else "this build did not make it"
        return f"{name} is not ready: {why}{shown}. {RESUME[0].upper()}{RESUME[1:]}."
    if state.progress is None:
        return f"{name} is not ready yet: the build is between two steps (`textflix up` resumes one that stopped){shown}."
    learning = predict_step(model) not in state.steps and state.running_step != predict_step(model)
    what = f"still learning from the {state.train_size:,} reviews" if learning and state.train_size else (
        "still learning" if learning else "nearly ready"
    )
    eta = eta_of(state, model)
    when = f"{minutes(eta)} left on this machine" if eta is not None else "no estimate of the time left yet"
    # a shown model's explain step running: the highlights line says what it does
    doing = "" if state.running_step in map(explain_step, state.explaining) else f" — {doing_now(state)}"
    return f"{name} is {what}{doing}, {when}{shown}."


def highlights_entry(state: BuildState, model: str) -> dict:
    """What the pages' JSON says of a shown model whose highlights are not all in: ``{"highlights_pending":
    true, "step", "eta_s"}``, the seconds left of its explain step while it runs (else null)."""
    explaining = state.running_step == explain_step(model)
    eta = (state.progress or {}).get("eta_s") if explaining else None
    eta = float(eta) if isinstance(eta, int | float) and math.isfinite(eta) else None
    return {"highlights_pending": True, "step": state.running_step, "eta_s": eta}


def highlights_line(state: BuildState) -> str | None:
    """The line a page shows while a shown model's highlights are not all in (its explain step commits them
    review by review); None when every shown model's are."""
    if not state.explaining:
        return None
    model = state.explaining[0]
    name = DISPLAY_NAMES[model]
    alone = "a review not explained yet shows its prediction alone"
    if state.failed or state.stopped or state.status == "complete":
        resume = "" if state.pending else f" {RESUME[0].upper()}{RESUME[1:]}."  # else the pending line says it
        return f"{name}'s highlights are not all computed: the build stopped before they were; {alone}.{resume}"
    if state.progress is None:
        return (
            f"{name}'s highlights are not all computed yet: the build is between two steps (`textflix up` resumes "
            f"one that stopped); {alone}."
        )
    if state.running_step != explain_step(model):
        return f"{name}'s highlights are still being computed; {alone}."
    eta, progress = highlights_entry(state, model)["eta_s"], state.progress
    done = f"{math.floor(100 * progress.get('done', 0) / progress['total'])} % done, " if progress.get("total") else ""
    when = f"{minutes(eta)} left on this machine" if eta is not None else "no estimate of the time left yet"
    return f"{name}'s highlights are still being computed — {done}{when}; {alone}."


def build_line(state: BuildState) -> str | None:
    """All a page says of the build while it is under way: the pending line, then the highlights line."""
    return " ".join(line for line in (pending_line(state), highlights_line(state)) if line) or None


def seconds_said(seconds: float) -> str:
    """A duration as a person reads it: "4.8 s", "14 min 57 s"."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s" if whole < 3600 else f"{whole // 3600} h {whole % 3600 // 60} min"


def steps_table(state: BuildState) -> list[dict] | None:
    """/about's build progress, step by step (``step``, ``state``: done, running, failed, stopped or to come,
    and ``said``, in words): each step done with its seconds, the running one with its progress, the rest
    to come. None when the build has finished or did not list its steps."""
    progress = state.progress or {}
    if state.status == "complete" or not progress.get("steps"):
        return None
    rows = []
    for step in progress["steps"]:
        if step in state.steps:
            seconds = state.steps[step].get("seconds")
            rows.append({"step": step, "state": "done", "said": f"done in {seconds_said(seconds)}" if seconds else "done"})
        elif step == progress.get("step"):
            kind = "failed" if state.failed else "stopped" if state.stopped else "running"
            said = {"failed": "failed", "stopped": "stopped (the build's process has ended)"}.get(kind, progress.get("doing") or "running")
            if progress.get("total"):
                done, total = progress.get("done", 0), progress["total"]
                said += f": {done:,} of {total:,} {progress.get('unit', '')} ({math.floor(100 * done / total)} %)".rstrip()
            if kind == "running" and isinstance(progress.get("eta_s"), int | float):
                said += f", {minutes(progress['eta_s'])} left"
            rows.append({"step": step, "state": kind, "said": said})
        else:
            rows.append({"step": step, "state": "to come", "said": "to come"})
    return rows
