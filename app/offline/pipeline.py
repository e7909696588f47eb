"""The offline pipeline's machinery: a list of steps, a run record, resume.

A build is a list of ``Step`` objects (``app.offline.steps.build_steps``) run in order. Each step
declares its name and what it reads and writes, and records itself in the run record
(``Run.steps``) when it finishes; a rerun skips the recorded ones, and the per-review
steps commit in small batches, so a killed build resumes where it stopped and a
finished one is left untouched. The run record also keeps the build config
(``Settings.build_config``): a rerun with other values is refused rather than mixed.
A build holds ``build_lock`` from start to end, so a second build on the same data
directory or database stops at once instead of interleaving with the first. ``run(until=...)``
stops after one step (``textflix up`` serves then, and a background build does the rest), having
checked the input of every step; the running step's progress is in the run record (``Run.progress``),
for /about and the site's pending lines.

Nothing here knows one model or step from another, but that the site shows a model once its predict
step is done (``app.db.models_ready``), which the estimates of the time left follow.
"""

__all__ = ["CPU_RECIPE", "Pipeline", "built_pipeline"]

import fcntl
import gzip
import hashlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

import torch
from sqlalchemy import select, text
from sqlalchemy.engine import Connection, Engine, make_url

from app.db import (
    Review,
    Run,
    analyze,
    display_url,
    latest_run,
    make_engine,
    migrate,
    models_ready,
    predict_step,
    session_scope,
    sqlite_path,
    this_process,
)
from app.offline.estimates import Costs, StepClock, Work
from app.settings import Settings
from model import checkpoints
from model.checkpoints import Checkpoint
from model.config import AUTO, DISTILL, PLAIN, ConfigGroup, Sources, SplitConfig
from model.data import Splits, read_file_splits, read_splits
from model.devices import resolve_device, training_precision
from model.files import atomic_write
from model.names import DISPLAY_NAMES, MODELS, TRAIN, items_called
from model.reviews_file import ReviewsFile
from model.trained import Classifier, ModelUnavailable, load_trained

log = logging.getLogger("textflix")
CHECKPOINTS_DIR = "checkpoints"  # in the data directory: pretrained checkpoints put together from pieces
KEPT_SPLITS = "reviews_splits.json.gz"  # in the data directory: a user's file's splits (``Pipeline.splits``)
BUILD_LOCK_FILE = "build.lock"  # in the data directory; a SQLite database gets "<file>.build.lock" beside it
BUILD_HOLDER = "textflix build"  # how a lock names its holder: "textflix build (pid N on HOST)"
# The key of the PostgreSQL advisory lock: fixed, derived from the name, positive.
BUILD_LOCK_KEY = int.from_bytes(hashlib.sha256(b"textflix build").digest()[:8], "big") >> 1
# What --set recipe=auto builds, for each of these settings not given: as the settings declare it
# (model.config.RecipeConfig says why).
CUDA_RECIPE, CPU_RECIPE = Settings.auto_recipe("cuda"), Settings.auto_recipe("cpu")
StepsOfRecipe = Callable[[str], Sequence["Step"]]
# The running step's progress is written to the run record at most this often (and at its start and end).
PROGRESS_WRITE_S = 5.0


class BuildError(Exception):
    """A build that cannot go on; the message says why and what to do."""


def failure(error: BaseException) -> str:
    """What a failed step's run record says stopped it, for /about: a BuildError's message, written for
    users; of any other error only its kind (its message may name this machine's paths)."""
    if isinstance(error, BuildError):
        return str(error)
    return "interrupted" if isinstance(error, KeyboardInterrupt) else type(error).__name__


class Step:
    """One step of the build. A subclass sets ``name``, ``reads`` and ``writes`` and defines ``run``."""

    name: str
    reads: tuple[str, ...] = ()  # tables, files and run-record fields the step needs
    writes: tuple[str, ...] = ()  # and those it fills
    doing: str = ""  # what /about says while it runs; default "the build's NAME step is running"
    formerly: tuple[str, ...] = ()  # the step's names in older builds: a run record listing one has it done

    def recorded_in(self, recorded: "set[str] | dict") -> bool:
        """Whether the run record's steps ``recorded`` list this step as finished, under its name or a former one."""
        return self.name in recorded or any(name in recorded for name in self.formerly)

    def prepare(self, build: "Pipeline") -> None:
        """Work to do before the database is touched, e.g. reading and checking input files."""

    def up_to_date(self, build: "Pipeline") -> bool:
        """Whether a step the run record lists as finished still is (e.g. its files are there)."""
        return True

    def run(self, build: "Pipeline") -> dict | None:
        """Do the step's work; what it returns is kept in its entry of the run record's steps."""
        raise NotImplementedError

    def work(self, build: "Pipeline") -> Work | None:
        """What the step still has to do, for the estimates of the time left (``app.offline.estimates``);
        None when that cannot be told."""
        return None


class Pipeline:
    """Runs a build's steps against the database of ``settings``; the steps share what it holds.

    ``steps`` is the list, or a function of the recipe that makes it (``app.offline.steps.build_steps``):
    with --set recipe=auto the recipe is known only once ``run`` has read the database's run record."""

    def __init__(self, settings: Settings, steps: Sequence[Step] | StepsOfRecipe, progress: bool = True):
        self.settings = settings
        self._steps_of_recipe = steps if callable(steps) else None
        self.steps = [] if callable(steps) else list(steps)
        self.progress = progress
        self.engine: Engine | None = None
        self.run_id: int | None = None
        self.config: dict = {}  # the build config of the run record
        self._models: dict[str, Classifier] = {}
        self._splits: Splits | None = None
        self.costs = Costs()  # what the networks' reading costs on this machine, as timed so far
        self._work: dict[str, Work | None] = {}  # each step's work, once asked for
        self._recorded: set[str] = set()  # the steps the run record lists as finished
        self._running: Step | None = None
        self._clock: StepClock | None = None
        self._progress: dict | None = None  # what the run record's progress says now
        self._written = 0.0  # when the running step's progress was last written (time.monotonic)
        self._announced = False  # whether the running step's estimate is on the console yet

    # -- running ------------------------------------------------------------------

    def run(self, until: str | None = None) -> dict:
        """Run every unfinished step, or those up to and including step ``until``, holding the build
        lock; returns the run record."""
        with build_lock(self.settings):  # before anything reads the database: a refused build touches nothing
            stored = self._stored_run()
            self._choose_recipe(stored)
            if stored is not None:
                self._take_up(stored)  # refuses other settings before any step reads its input
            return self._run_steps(set(stored.steps) if stored is not None else set(), until)

    def _stored_run(self) -> Run | None:
        """The database's run record; None for a database that has none yet, or no database."""
        path = sqlite_path(self.settings.database)
        if path is not None and not path.exists():
            return None
        self._connect()
        with session_scope(self.engine) as session:
            return latest_run(session)

    def _choose_recipe(self, stored: Run | None) -> None:
        """Make --set recipe=auto concrete (``concrete_recipe``) and, given a function of the recipe, make the steps."""
        self.settings = concrete_recipe(self.settings, stored.config if stored is not None else None, self.device)
        if self._steps_of_recipe is not None:
            self.steps = list(self._steps_of_recipe(self.settings.recipe))

    def _run_steps(self, recorded: set[str], until: str | None) -> dict:
        names = [step.name for step in self.steps]
        steps = self.steps[: names.index(until) + 1] if until is not None else self.steps
        prepared = {}
        # every unfinished step, also those after ``until``: bad input stops `textflix up` before it serves
        for step in self.steps:  # before the database is created: bad input leaves it as it was
            if not step.recorded_in(recorded):
                started = time.perf_counter()
                step.prepare(self)
                prepared[step.name] = time.perf_counter() - started
        if self.run_id is None:
            self._start_run()
        self._recorded = set(recorded)
        if any(not step.recorded_in(recorded) for step in steps):
            log.info("Number format: %s.", training_precision(self.device))
        for step in steps:
            done = step.recorded_in(recorded)
            if done and step.up_to_date(self):
                log.info("Step %s: already done, skipped.", step.name)
                continue
            log.info("Step %s: %s from %s.", step.name, ", ".join(step.writes), ", ".join(step.reads))
            self._start_step(step)
            started = time.perf_counter()
            try:
                facts = step.run(self) or {}
            except BaseException as error:
                with suppress(Exception):  # the database may be what failed the step
                    self._set_progress({"step": step.name, "failed": failure(error)})
                raise
            self._running = self._clock = None
            self._set_progress(None)
            if not done:
                self._finish(step, time.perf_counter() - started + prepared.get(step.name, 0.0), facts)
                self._recorded.add(step.name)
        started = time.perf_counter()
        analyze(self.engine)
        log.info("Refreshed the database's statistics for the query planner in %.1f s.", time.perf_counter() - started)
        return report(self.engine)

    def steps_to_do(self, record: dict) -> list[str]:
        """The names of the steps that the run record ``record`` (``report``'s) does not list as finished."""
        return [step.name for step in self.steps if not step.recorded_in(record["steps"])]

    def _connect(self) -> None:
        """Connect, and create or upgrade the schema."""
        if self.engine is None:
            self.engine = make_engine(self.settings.database)
            migrate(self.engine)

    def _take_up(self, stored: Run) -> None:
        """Carry on the database's run record, unless this build's settings differ from it."""
        if changed := changed_settings(stored.config, self.settings.build_config(), type(self.settings)):
            raise BuildError(
                f"The database {display_url(self.settings.database)} was built with other settings "
                f"({', '.join(changed)}); point --database at a new database or delete this one."
            )
        self.run_id, self.config = stored.id, stored.config

    def _start_run(self) -> None:
        """Create the database (when it is new) and this build's run record."""
        self._connect()
        config = self.settings.build_config()
        with session_scope(self.engine) as session:
            run = Run(config=config, steps={}, counts={}, metrics={})
            session.add(run)
            session.flush()
            self.run_id, self.config = run.id, run.config

    def _finish(self, step: Step, seconds: float, facts: dict) -> None:
        with session_scope(self.engine) as session:
            run = session.get(Run, self.run_id)
            run.steps = {**run.steps, step.name: {"seconds": round(seconds, 2), **facts}}
            if step is self.steps[-1]:
                run.status = "complete"
                run.finished_at = datetime.now(UTC)
        log.info("Step %s finished in %.1f s.", step.name, seconds)

    # -- what the steps share --------------------------------------------------------

    def run_record(self) -> Run:
        with session_scope(self.engine) as session:
            return session.get(Run, self.run_id)

    def step_progress(self, done: int, total: int, unit: str) -> None:
        """Say how far the running step is, in the run record: ``done`` of ``total`` ``unit``, the seconds it
        has left at its rate so far (``eta_s``) and each model's until it is ready (``ready_in_s``). Written
        at most every PROGRESS_WRITE_S seconds, and always at the first and the last report."""
        clock = self._clock
        if clock is None:  # work done outside a step (run_tasks called alone): no run record progress to say
            return
        clock.report(done, total)
        if clock.work is not None and (cost := clock.cost_per_read()) is not None:
            self.costs.timed(clock.work, cost)
        now = time.monotonic()
        if 0 < done < total and now - self._written < PROGRESS_WRITE_S:
            return
        ready_in_s = self.ready_in_s()
        progress = {**self._progress, "done": done, "total": total, "unit": unit,
                    "eta_s": rounded(self._running_left()), "ready_in_s": ready_in_s}  # fmt: skip
        self._set_progress(progress)
        self._written = now
        if not self._announced and (eta_s := clock.eta_s()) is not None:
            self._announced = True
            self._announce(done, total, unit, eta_s, ready_in_s)

    def _running_left(self) -> float | None:
        """The running step's seconds left: at its rate so far once it is timed, before that from its work
        still to do at its network's cost (``app.offline.estimates``); None when neither is known."""
        clock = self._clock
        if clock is None:
            return None
        if (timed := clock.eta_s()) is not None:
            return timed
        estimate = self.costs.seconds(clock.work)
        if estimate is None or clock.latest is None or not clock.latest[2]:
            return estimate
        _, done, total = clock.latest
        return estimate * max(total - done, 0) / total

    def _start_step(self, step: Step) -> None:
        """Time ``step`` from now on, and say in the run record that it runs, with every step of the build."""
        self._running, self._clock, self._announced = step, StepClock(self.work(step, fresh=True)), False
        self._set_progress({
            "step": step.name, "doing": step.doing or f"the build's {step.name} step is running",
            "steps": [step.name for step in self.steps], "eta_s": rounded(self._running_left()),
            "ready_in_s": self.ready_in_s(),
        })  # fmt: skip

    def _announce(self, done: int, total: int, unit: str, eta_s: float, ready_in_s: dict) -> None:
        """The running step's estimate on the console, once it is timed."""
        ready = "".join(f"; {DISPLAY_NAMES[model]} on the site in about {minutes(seconds)}"
                        for model, seconds in ready_in_s.items() if seconds is not None)  # fmt: skip
        log.info(
            "Step %s: %s of %s %s in %.0f s: about %s left for it at this rate on this machine%s.",
            self._running.name, f"{done:,}", f"{total:,}", unit, self._clock.latest[0] - self._clock.first[0],
            minutes(eta_s), ready,
        )  # fmt: skip

    def work(self, step: Step, fresh: bool = False) -> Work | None:
        """``step.work``, asked once (again when ``fresh``: the running step's, as it starts)."""
        if fresh or step.name not in self._work:
            self._work[step.name] = step.work(self)
        return self._work[step.name]

    def ready_in_s(self) -> dict[str, int | None]:
        """Each model not on the site yet: the seconds until its predict step is done, the running step's at
        its rate so far (or its work's estimate) and the steps' after it up to that one from their work; None
        where a step's cannot be estimated (``app.offline.estimates``)."""
        names = [step.name for step in self.steps]
        running = names.index(self._running.name) if self._running is not None else 0
        ready = models_ready(self._recorded)
        left = {}
        for model in MODELS:
            target = names.index(predict_step(model)) if predict_step(model) in names else -1
            if model in ready or target < running:
                continue
            seconds = self._running_left()
            for step in self.steps[running + 1 : target + 1]:
                if seconds is None:
                    break
                if not step.recorded_in(self._recorded):
                    estimate = self.costs.seconds(self.work(step))
                    seconds = None if estimate is None else seconds + estimate
            left[model] = rounded(seconds)
        return left

    def _set_progress(self, progress: dict | None) -> None:
        """What the run record says the build is doing now (None: nothing), and which process is doing
        it: a build killed mid-step cannot clear it, so /about checks that process (``process_gone``)."""
        self._progress = progress
        with session_scope(self.engine) as session:
            session.get(Run, self.run_id).progress = {**progress, "builder": this_process()} if progress else None

    def update_run(self, **fields: dict) -> None:
        """Merge ``fields`` (counts=..., metrics=...) into the run record's JSON fields."""
        with session_scope(self.engine) as session:
            run = session.get(Run, self.run_id)
            for name, values in fields.items():
                setattr(run, name, {**getattr(run, name), **values})

    def splits(self) -> Splits:
        """The reviews read and split as the settings say, once per process: the user's file of --reviews,
        or else the IMDB archive. A file's splits are kept in the data directory (``KEPT_SPLITS``), so that
        the build's next process (``textflix up``'s background build, a resumed build) takes them from there
        instead of reading the file again; kept for these settings and this file only."""
        if self._splits is None:
            s = self.settings
            if s.reviews is not None:
                self._splits = self._kept_splits() or self._read_file()
            else:
                unlabeled = s.recipe == DISTILL or s.prior_reviews > 0
                self._splits = read_splits(s.group(Sources), s.group(SplitConfig), s.data_dir, unlabeled=unlabeled)
                self._log_splits(self._splits)
        return self._splits

    def _read_file(self) -> Splits:
        """The user's file's splits, read, logged and kept (``splits``)."""
        s = self.settings
        unlabeled = max(s.unlabeled if s.recipe == DISTILL else 0, s.prior_reviews)
        curve_size = max(s.learning_curve, default=0)
        reviews = ReviewsFile(s.reviews, s.columns, s.label_rule)
        splits = read_file_splits(reviews, s.reviews, s.group(SplitConfig), unlabeled, curve_size)
        self._log_splits(splits)
        path = s.data_dir / KEPT_SPLITS
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path, "wb") as raw, gzip.open(raw, "wt", encoding="utf-8") as file:
            json.dump({"key": self._file_key(), "splits": splits.as_json()}, file)
        return splits

    def _kept_splits(self) -> Splits | None:
        """The splits ``_read_file`` kept for these settings and this file (its path, size and time); None
        when there are none, or they are another build's or another version of the file's."""
        path = self.settings.data_dir / KEPT_SPLITS
        try:
            with gzip.open(path, "rt", encoding="utf-8") as file:
                kept = json.load(file)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError) as error:
            log.warning("%s could not be read (%s); the file of reviews is read again.", path, error)
            return None
        if kept.get("key") != self._file_key():
            return None
        log.info("The data step's splits of %s are taken from %s, not read again.", self.settings.reviews, path)
        return Splits.from_json(kept["splits"])

    def _file_key(self) -> str:
        """What a file's splits are made from: the build's settings, and the file as its size and time say."""
        stat = self.settings.reviews.stat()
        made_of = {"config": self.settings.build_config(), "file": [stat.st_size, stat.st_mtime_ns]}
        return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()

    def _log_splits(self, splits: Splits) -> None:
        s = self.settings
        log.info(
            "Read %s reviews from %s: %s for training, %s in the catalogue (%s), %s for evaluation, "
            "%s duplicates dropped.",
            f"{splits.reviews_read:,}", splits.archive or s.reviews, f"{len(splits.train):,}",
            f"{len(splits.catalogue):,}", items_called(len(splits.title_ids), splits.corpus, s.item_noun),
            f"{len(splits.eval):,}", f"{splits.dropped_duplicates:,}",
        )  # fmt: skip

    @cached_property
    def training_set(self) -> tuple[list[str], list[str], list[str]]:
        """Source keys, texts and gold labels of the training reviews, in id order."""
        with session_scope(self.engine) as session:
            rows = session.execute(
                select(Review.source_key, Review.text, Review.label).where(Review.split == TRAIN).order_by(Review.id)
            ).all()
        return [r.source_key for r in rows], [r.text for r in rows], [r.label for r in rows]

    def fingerprint(self, groups: Sequence[type[ConfigGroup]], **derived: dict) -> str:
        """Names what a trained model is made from: the build's values of the settings ``groups``
        (as the run record has them), its data version, the training set, and any ``derived``
        values (a model's config as its step makes it from settings of other names). Other settings
        (LIME's, say) do not count, so changing them does not retrain the model."""
        fields = {name for group in groups for name in self.settings.group_class(group).model_fields}
        fields.add("data_version")
        config = {name: value for name, value in self.config.items() if name in fields}
        blob = json.dumps({"config": config, "train": sorted(self.training_set[0]), **derived}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def checkpoint(self, name: str) -> Checkpoint:
        """Where pretrained checkpoint ``name`` loads from; a split one is put together in the data directory."""
        return checkpoints.resolve(name, self.settings.data_dir / CHECKPOINTS_DIR)

    @cached_property
    def device(self) -> torch.device:
        return resolve_device(self.settings.device)

    def model(self, name: str) -> Classifier:
        """The trained model ``name``, loaded once."""
        if name not in self._models:
            try:
                self._models[name] = load_trained(
                    name, self.settings.models_dir, self.device, cpu_int8=self.settings.cpu_int8
                )
            except ModelUnavailable as error:
                raise BuildError(str(error)) from error
        return self._models[name]


def rounded(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds)


def minutes(seconds: float) -> str:
    """``seconds`` in words: "40 s", "12 minutes", "1 h 35 min"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds // 3600:.0f} h {seconds % 3600 / 60:.0f} min"


def concrete_recipe(settings: Settings, stored: dict | None, device: torch.device) -> Settings:
    """``settings`` with --set recipe=auto made concrete before a build stores them: the recipe (and
    the other settings CUDA_RECIPE and CPU_RECIPE name) of the database's own build config
    ``stored`` when there is one, otherwise CUDA_RECIPE on a CUDA ``device`` and CPU_RECIPE
    elsewhere. So a database is carried on, or refused, as it was built, whatever the device."""
    if settings.recipe != AUTO:
        return settings
    given = settings.model_fields_set - {"recipe"}
    if stored is not None:
        # a record from before recipes existed keeps "auto", which every step builds as plain
        chosen = {name: stored[name] for name in CUDA_RECIPE | CPU_RECIPE if name in stored and name not in given}
    else:
        defaults = CUDA_RECIPE if device.type == "cuda" else CPU_RECIPE
        chosen = {name: value for name, value in defaults.items() if name not in given}
    recipe = chosen.get("recipe", PLAIN)
    log.info("Recipe auto: %s (%s).", recipe, "the database's own" if stored is not None else f"on {device.type}")
    return settings.model_copy(update=chosen)


@contextmanager
def build_lock(settings: Settings) -> Iterator[None]:
    """Make the database and the data directory this process's alone until the block ends,
    or raise BuildError naming the build that holds them. The database comes first, so a
    build refused there creates nothing, not even its data directory. The locks die with
    the process: a killed build leaves none behind."""
    holder = f"{BUILD_HOLDER} (pid {os.getpid()} on {socket.gethostname()})"
    database = settings.database
    with ExitStack() as locks:
        if (path := sqlite_path(database)) is not None:
            # beside the file, even inside the data directory: another build may share the file, not the folder
            beside = path.with_name(path.name + ".build.lock")
            locks.enter_context(file_lock(beside, f"the database {path.resolve()}", holder))
        elif make_url(database).get_backend_name() == "postgresql":
            locks.enter_context(postgresql_lock(database, holder))
        data_dir = settings.data_dir
        locks.enter_context(file_lock(data_dir / BUILD_LOCK_FILE, f"the data directory {data_dir.resolve()}", holder))
        yield


@contextmanager
def file_lock(path: Path, what: str, holder: str) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``, with ``holder`` written inside; BuildError if another process has it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as file:  # "a+" opens without erasing the holder's name
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            raise BuildError(another_build(file.read(), what)) from None
        file.truncate(0)
        file.write(holder)
        file.flush()
        yield


@contextmanager
def postgresql_lock(url: str, holder: str) -> Iterator[None]:
    """The build's session-level advisory lock, held on a connection of its own whose
    application name is ``holder``; BuildError if another session has it."""
    engine = make_engine(url)
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("SELECT set_config('application_name', :name, false)"), {"name": holder})
            if not connection.scalar(text("SELECT pg_try_advisory_lock(:key)"), {"key": BUILD_LOCK_KEY}):
                raise BuildError(another_build(advisory_lock_holder(connection), f"the database {display_url(url)}"))
            yield
    finally:
        engine.dispose()  # ends the session, which releases the lock


def advisory_lock_holder(connection: Connection) -> str:
    """The application name of the session that holds the build's advisory lock in this database."""
    holder = connection.scalar(
        text(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
            "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND l.classid::bigint = :high AND l.objid::bigint = :low"
        ),
        {"high": BUILD_LOCK_KEY >> 32, "low": BUILD_LOCK_KEY & 0xFFFFFFFF},
    )
    return holder or ""


def another_build(holder: str, what: str) -> str:
    """The sentence a refused build prints; ``holder`` names the other build when it could be read."""
    name = holder.strip() if holder.startswith(BUILD_HOLDER) else BUILD_HOLDER
    return f"Another {name} is running on {what}; wait for it to finish or stop it."


def changed_settings(stored: dict, config: dict, settings_type: type[Settings]) -> list[str]:
    """The build settings whose value differs from the run record's; a setting the record
    predates counts as having had its value of then (``Settings.predating_values``), else its default."""
    defaults = {**settings_type.model_construct().build_config(), **settings_type.predating_values()}
    return sorted(key for key, value in config.items() if stored.get(key, defaults[key]) != value)


def built_pipeline(data_dir: Path, imdb: str) -> Pipeline:
    """A pipeline over the database of ``data_dir`` with the settings it was built with, connected: how a
    study (scripts/studies/) reads a build. A setting the build predates has the value it had then."""
    with session_scope(make_engine(Settings(data_dir=data_dir).database)) as session:
        built = {**Settings.predating_values(), **latest_run(session).config}
    settings = Settings(data_dir=data_dir, imdb=imdb, **{k: v for k, v in built.items() if k in Settings.model_fields})
    pipeline = Pipeline(settings, [], progress=False)
    pipeline.run()  # no steps: it takes up the database's run, refusing other settings
    return pipeline


def report(engine: Engine) -> dict:
    """The latest run record as plain JSON-ready data."""
    with session_scope(engine) as session:
        run = latest_run(session)
        if run is None:
            raise BuildError("The database holds no pipeline run yet: run `textflix build`.")
        return run.record()
