"""The server's analyzer while the build goes on: the models that are ready, loaded as they become so.

``ReadyAnalyzer`` stands where the analyzer of both models stood. At start-up it loads the models
the run record says are ready (``app.web.build_state``), then a watch task re-reads the record every
``build_poll_s`` and, once another model is ready, loads the ready ones anew in a thread and swaps
them in: the site gets richer without a restart, and a model is never read before its build step
has finished (a model folder is written whole, ``model.artifacts``, before its steps go on).

An analysis answers with the loaded models and marks each other one as pending
(``build_state.pending_entry``); with none loaded, the texts are still split into their sentences,
so that a stored review has them. The user reviews stored while a model was pending get its
prediction and explanation once it is loaded and explained (``app.web.store.fill_in_model``), for as
long as analyses begun before the swap may still be storing: a model is loaded as soon as its
predictions are in, but until its explain step is done that step may still write the explanation
of a review stored before it listed its reviews, which the server must not have written first.
"""

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool

from app.settings import Settings
from app.web.analysis import Analyzer, NoModels, analysis_of
from app.web.analysis_types import Analysis, PendingModel
from app.web.build_state import BuildWatch, pending_entry
from app.web.errors import AppError
from app.web.store import fill_in_model, lacking_model
from model.names import BERT, DISPLAY_NAMES, MODELS
from model.sentences import Span, sentence_spans

if TYPE_CHECKING:
    from model.word_shares import SentenceWords

log = logging.getLogger("textflix")
STOP_GRACE_S = 120.0  # the analyzer swapped out stops this long after (its analyses under way finish first)


class ReadyAnalyzer:
    """The ``Analyzer`` of the models that are ready, growing as the build makes more of them ready."""

    def __init__(
        self,
        settings: Settings,
        watch: BuildWatch,
        engine_of: Callable[[], Engine | None],
        write_lock,
        load: Callable[[Settings, tuple[str, ...]], Analyzer],
    ):
        """``engine_of``: the app's engine now (None without a database); ``load``: the analyzer of some
        models (``app.web.analysis.load_analyzer``)."""
        self.settings, self.watch, self.engine_of, self.write_lock, self.load = settings, watch, engine_of, write_lock, load
        self.inner: Analyzer | None = None
        self.loaded: tuple[str, ...] = ()
        self._tried: tuple[str, ...] = ()  # the ready models last loaded or tried
        self._explained: tuple[str, ...] = ()  # the explained models last seen
        self._problem: str | None = None
        self._watching: asyncio.Task | None = None
        self._fill_until = 0.0  # loop time until which the watch fills in stored reviews
        self._retired: dict[asyncio.Task, Analyzer] = {}  # analyzers swapped out, each stopping later

    @property
    def problem(self) -> str | None:
        """Why nothing can be analysed: a ready model could not be loaded and none is. None while the
        build is still making them (the answers mark them pending)."""
        return None if self.inner is not None else self._problem

    @property
    def batchers(self) -> dict:
        return getattr(self.inner, "batchers", {})

    # -- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        if self._watching is None:
            await self.refresh()
            self._watching = asyncio.ensure_future(self._watch())

    async def stop(self) -> None:
        if self._watching is not None:
            self._watching.cancel()
            self._watching = None
        for task, old in list(self._retired.items()):
            task.cancel()
            await old.stop()
        if self.inner is not None:
            await self.inner.stop()

    def info(self) -> dict:
        info = self.inner.info() if self.inner is not None else {}
        return {**info, "models_loaded": list(self.loaded)}

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.settings.build_poll_s)
            try:
                await self.refresh()
            except Exception:  # the watch goes on; the next look may succeed
                log.exception("Looking for the models the build has made ready failed.")

    async def refresh(self) -> None:
        """Re-read the run record; load the ready models if they changed; fill in stored reviews."""
        state = await run_in_threadpool(self.watch.refresh, self.engine_of())
        if state.ready != self._tried:
            self._tried = state.ready
            await self._load(state.ready)
        if state.explained != self._explained:
            self._explained = state.explained
            self._fill_soon()
        if self.loaded and asyncio.get_running_loop().time() < self._fill_until:
            await self._fill_in()

    async def _load(self, ready: tuple[str, ...]) -> None:
        if not ready:
            return
        loaded = await run_in_threadpool(self.load, self.settings, ready)
        if isinstance(loaded, NoModels) or loaded.problem is not None:
            self._problem = loaded.problem
            return
        await loaded.start()
        old, self.inner, self.loaded, self._problem = self.inner, loaded, ready, None
        if old is not None:
            self._retire(old)
        log.info("The site now analyses with %s.", " and ".join(DISPLAY_NAMES[model] for model in ready))
        self._fill_soon()
        await self._fill_in()

    def _fill_soon(self) -> None:
        """Have the watch fill in stored reviews for as long as analyses begun before now may still be storing."""
        limit = self.settings.analysis_timeout_s or STOP_GRACE_S
        self._fill_until = asyncio.get_running_loop().time() + limit + self.settings.build_poll_s

    def _retire(self, old: Analyzer) -> None:
        async def stop_later():
            await asyncio.sleep(self.settings.analysis_timeout_s or STOP_GRACE_S)
            await old.stop()

        task = asyncio.ensure_future(stop_later())
        self._retired[task] = old
        task.add_done_callback(lambda done: self._retired.pop(done, None))

    async def _fill_in(self) -> None:
        """Each loaded and explained model's prediction and explanation of the user reviews that lack them."""
        engine, inner = self.engine_of(), self.inner
        if engine is None or inner is None:
            return
        for model in (model for model in self.loaded if model in self.watch.state.explained):
            try:
                lacking = await run_in_threadpool(lacking_model, engine, model)
            except SQLAlchemyError as error:
                log.warning("The reviews %s has not read could not be listed (%s); the next look tries again.", model, error)
                return
            for review_id, text, spans in lacking:  # the stored sentences, which its weights belong to
                try:
                    p_positive, explanations = await asyncio.gather(inner.predict([text]), inner.explain(text, spans, [model]))
                    p, explanation = float(p_positive[model][0]), explanations[model].as_dict()
                    await run_in_threadpool(fill_in_model, engine, self.write_lock, review_id, model, p, explanation)
                except Exception:  # the others go on; this one is tried again on the next look
                    log.exception("%s could not read review %d, posted while it was pending.", DISPLAY_NAMES[model], review_id)
            if lacking:
                log.info("%s has read the %d reviews posted while it was pending.", DISPLAY_NAMES[model], len(lacking))

    # -- analysis --------------------------------------------------------------

    async def analyze(self, texts: list[str], explain: bool, words: bool = False) -> list[Analysis]:
        """The loaded models' analysis of ``texts`` (``ModelAnalyzer.analyze``), each other model pending (and
        BERT's ``words`` absent while it is)."""
        inner, loaded, state = self.inner, self.loaded, self.watch.state
        pending = {model: PendingModel(**pending_entry(state, model)) for model in MODELS if model not in loaded}
        if inner is not None:
            return await inner.analyze(texts, explain, pending, words)
        return await run_in_threadpool(unanalysed, texts, explain, pending)

    async def review_words(self, text: str, spans: list[Span]) -> "list[SentenceWords] | None":
        """BERT's word shares of a stored review (``ModelAnalyzer.review_words``); ``AppError`` (503) while BERT is pending."""
        inner = self.inner
        if inner is None or getattr(inner, "words", None) is None:
            step = self.watch.state.running_step
            where = f"the build is at its {step} step" if step else "no build has made it ready"
            raise AppError.one(
                503, None, f"{DISPLAY_NAMES[BERT]} is not loaded ({where}): its words can be computed once it is.",
            )  # fmt: skip
        return await inner.review_words(text, spans)


def unanalysed(texts: list[str], explain: bool, pending: Mapping[str, PendingModel]) -> list[Analysis]:
    """The analysis of ``texts`` while no model is loaded (each says what ``pending`` says of it); with
    ``explain`` their sentences."""
    return [
        analysis_of(text, sentence_spans(text) if explain else None, {}, {}, {}, {}, pending) for text in texts
    ]
