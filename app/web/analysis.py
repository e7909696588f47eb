"""Live analysis of new reviews: both models, and sentence-level LIME.

``ModelAnalyzer`` owns the trained models (loaded once, at start-up) and answers
``await analyzer.analyze(texts, explain)`` with, per text::

    {"predictions": {"nbsvm": {"label": "positive", "p_positive": 0.81}, "bert": {...}},
     "sentences": [{"text": ..., "start": 0, "end": 25, "weights": {"nbsvm": 0.2, "bert": 0.4}}],
     "explanations": {"nbsvm": {"samples": 64, "intercept": ..., "score": ...}, "bert": {...}}}

(``sentences`` and ``explanations`` only with ``explain``; an explained text's "what if", each
sentence's exact share of an additive model's log-odds and the fewest sentences that flip a
verdict, is added by ``app.web.whatif``.)

Every model call goes through the model's ``MicroBatcher`` (``app.web.batching``), LIME's
too (one call per explanation, deduplicated, run in a thread pool), and every analysis
first reserves its model passes from the ``WorkLimiter``. Cancelling an analysis (its
client went away) drops its queued texts and stops its LIME threads.

The pages and the API see it through the ``Analyzer`` protocol; when the models cannot
be loaded, ``NoModels`` stands in and says why.
"""

import asyncio
import concurrent.futures
import logging
import math
import os
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable
from typing import Protocol

import numpy as np

from app.settings import Settings
from app.web import whatif
from app.web.batching import BACKGROUND, CALL_WEIGHT, FULL_TEXT_CHARS, MicroBatcher, ProbaFn, WorkLimiter, analysis_cost
from app.web.limits import off_the_loop
from model.config import LimeConfig
from model.names import DISPLAY_NAMES, MODELS, STUDENT_NETWORK, TEACHER, label_of
from model.quality import assessment
from model.sentences import Span, split_sentences

log = logging.getLogger("textflix")
# What a text costs BERT's teacher against its student, the unit of ``analysis_cost``: a one-line
# review 4.2× (18.8 against 4.5 ms), 64 one-sentence texts of 20,000 characters 3.9× (11.0 against
# 2.8 s), on 2 CPU cores (model/README.md, "The teacher for one-sentence texts").
READER_COST = 4


def sentence_spans(text: str) -> list[Span]:
    """The sentences of ``text``; the whole (stripped) text when the splitter finds none."""
    spans = split_sentences(text)
    if spans:
        return spans
    start = len(text) - len(text.lstrip())
    end = len(text.rstrip())
    return [Span(start, end, text[start:end])]


def finite(value: float) -> float:
    return float(value) if math.isfinite(value) else 0.0


def finite_or_none(value):
    """A figure for JSON: non-finite floats become None; other values pass."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


class ExplanationTooLarge(Exception):
    """The texts of one request have more sentences than ``max_explain_sentences``, or more
    work than the server takes at once; ``limit`` is the limit it is over."""

    def __init__(self, message: str, limit: int):
        self.limit = limit
        super().__init__(message)


class Analyzer(Protocol):
    """What the pages and the API analyse reviews with."""

    problem: str | None  # why it cannot analyse (the models are not loaded), or None

    async def analyze(self, texts: list[str], explain: bool) -> list[dict]: ...

    def info(self) -> dict: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class NoModels:
    """The analyzer when the models cannot be loaded: the pages and the API say why."""

    def __init__(self, problem: str):
        self.problem = problem

    async def analyze(self, texts: list[str], explain: bool) -> list[dict]:
        raise RuntimeError(self.problem)  # callers check ``problem`` first

    def info(self) -> dict:
        return {}

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


def load_analyzer(settings: Settings, models: tuple[str, ...] = MODELS) -> Analyzer:
    """``models`` (all by default) from ``settings.models_dir`` behind a ``ModelAnalyzer``, or ``NoModels``
    saying why not."""
    from model.devices import resolve_device
    from model.trained import ModelUnavailable, load_trained

    started = time.perf_counter()
    if settings.inference_threads:
        import torch

        torch.set_num_threads(settings.inference_threads)
    try:
        device = resolve_device(settings.device)
        loaded = {
            name: load_trained(name, settings.models_dir, device, settings.inference_max_tokens, settings.cpu_int8)
            for name in models
        }
    except ModelUnavailable as error:
        log.error("The API cannot analyse reviews: %s The pages still serve the database.", error)
        # What clients are told: no paths, no exception text (those are in the log).
        return NoModels(f"the {DISPLAY_NAMES[error.model]} model is missing or damaged; run `textflix build` to train it.")
    for model in loaded.values():  # warm up (CUDA context, kernels, caches) before the first request
        model.predict_proba(["A warm-up sentence. It was fine.", "A warm-up sentence."])
    name = str(device)
    if device.type == "cuda":
        import torch

        name = f"{device} ({torch.cuda.get_device_name(device)})"
    log.info(
        "%s loaded from %s on %s in %.1f s; this server process (pid %d) holds %s MB of memory at its peak.",
        " and ".join(map(DISPLAY_NAMES.get, models)), settings.models_dir, name, time.perf_counter() - started,
        os.getpid(), f"{peak_memory_mb():,.0f}",
    )  # fmt: skip
    return analyzer_of(loaded, settings, name, settings.batch_max_weight or CALL_WEIGHT[device.type])


def analyzer_of(loaded: dict, settings: Settings, device: str = "cpu", call_weight: float = 8) -> "ModelAnalyzer":
    """A ``ModelAnalyzer`` of trained models (``model.trained.Classifier``, by name): LIME's texts go as
    their sentences to a model that reads sentences, and a BERT that hands some texts to its
    teacher says which network read each."""
    return ModelAnalyzer(
        {name: model.predict_proba for name, model in loaded.items()},
        settings,
        device,
        call_weight,
        reads_sentences={name: model.reads_sentences for name, model in loaded.items()},
        read_by={name: network_of(model) for name, model in loaded.items() if getattr(model, "one_sentence_reader", None)},
        readings={
            name: whatif.Reading(model.sentences_read, model.length_scale)
            for name, model in loaded.items() if model.reads_sentences
        },
    )


def network_of(model) -> Callable[[str], str]:
    """Which network of a model with a ``one_sentence_reader`` reads a text: the teacher or the student."""
    return lambda text: TEACHER if model.reads_alone(text) else STUDENT_NETWORK


def peak_memory_mb() -> float:
    """The most memory this process has held so far, in MB (Linux counts ``ru_maxrss`` in kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1000


class LimeCall:
    """The model calls one explanation's LIME threads make, so that they can all be cancelled."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._cancelled = threading.Event()
        self._pending: set[concurrent.futures.Future] = set()
        self._lock = threading.Lock()

    def scorer(self, batcher: MicroBatcher) -> ProbaFn:
        """A ``predict_proba`` for LIME (run in a LIME thread) that goes through ``batcher``."""

        def predict(texts: list[str]) -> np.ndarray:
            future = asyncio.run_coroutine_threadsafe(batcher(texts, BACKGROUND), self.loop)
            with self._lock:
                self._pending.add(future)
            try:
                if self._cancelled.is_set():
                    future.cancel()
                return future.result()  # CancelledError ends the LIME run once the call is cancelled
            finally:
                with self._lock:
                    self._pending.discard(future)

        return predict

    def cancel(self) -> None:
        self._cancelled.set()
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.cancel()


class ModelAnalyzer:
    """The loaded models, their micro-batchers and LIME, for the API and the /analyze page."""

    problem: str | None = None

    def __init__(
        self,
        models: dict[str, ProbaFn],
        settings: Settings,
        device: str = "cpu",
        call_weight: float = 8,
        reads_sentences: dict[str, bool] | None = None,
        read_by: dict[str, Callable[[str], str]] | None = None,
        readings: dict[str, "whatif.Reading"] | None = None,
    ):
        """``reads_sentences``: the models that take a text as its ``Sentences`` (LIME's texts go to
        them so); ``read_by``: for a model that hands some texts to another network, which reads a text;
        ``readings``: how the models that read a text as the sum of its sentences do (``whatif.Reading``)."""
        self.settings = settings
        self.reads_sentences = reads_sentences or {}
        self.read_by = read_by or {}
        self.readings = readings or {}
        self.device = device
        window = settings.batch_window_ms / 1000.0
        self.batchers = {
            name: MicroBatcher(name, models[name], window, settings.batch_max_texts, call_weight)
            for name in MODELS
            if name in models  # a model not ready yet has none (``app.web.ready_analyzer``)
        }
        self.work = WorkLimiter(settings.max_work_in_flight)
        self._lime: ThreadPoolExecutor | None = None

    # -- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        if self._lime is None:
            self._lime = ThreadPoolExecutor(self.settings.explain_workers, thread_name_prefix="textflix-lime")

    async def stop(self) -> None:
        for batcher in self.batchers.values():
            await batcher.stop()
        if self._lime is not None:
            self._lime.shutdown(wait=False, cancel_futures=True)
            self._lime = None

    def info(self) -> dict:
        return {
            "device": self.device,
            "batch_window_ms": self.settings.batch_window_ms,
            "batching": self.settings.batch_window_ms > 0,
            "model_calls": {name: b.calls for name, b in self.batchers.items()},
            "work_in_flight": self.work.in_flight,
        }

    # -- analysis --------------------------------------------------------------

    async def predict(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Positive-class probability of every text, per model."""
        names = list(self.batchers)
        probs = await asyncio.gather(*(self.batchers[name](texts) for name in names))
        return {name: p[:, 1] for name, p in zip(names, probs)}

    async def analyze(self, texts: list[str], explain: bool) -> list[dict]:
        """Both models' predictions of ``texts`` (and explanations); ``ServerBusy`` when over capacity,
        ``ExplanationTooLarge`` when the texts have more sentences than one request may explain, or
        their explanations more work than the server takes at once."""
        texts, lime = list(texts), self.settings.group(LimeConfig)
        readers = await off_the_loop(self._readers, texts)  # splits each text
        # The texts' own passes first: what the explanations cost is known once the texts are split.
        async with self.work.admit(analysis_cost(texts, False, lime) + self._reader_cost(texts, readers, False, lime)) as reserve:
            if explain:  # side by side, so the texts and LIME's samples can share model calls
                spans = await self._sentences(texts)
                reserve(self._explanation_cost(texts, spans, readers, lime))
                p_positive, *explanations = await asyncio.gather(
                    self.predict(texts), *(self.explain(text, text_spans) for text, text_spans in zip(texts, spans))
                )
                await self._what_ifs(texts, spans, p_positive, explanations)
            else:
                p_positive, explanations = await self.predict(texts), []
        results = []
        for index in range(len(texts)):
            predictions = {}
            for name in self.batchers:
                p = float(p_positive[name][index])
                predictions[name] = {"label": label_of(p), "p_positive": p}
                if name in readers[index]:
                    predictions[name]["read_by"] = readers[index][name]
            results.append({"predictions": predictions})
        for result, explanation in zip(results, explanations):
            result.update(explanation)
        return results

    async def _sentences(self, texts: list[str]) -> list[list[Span]]:
        """The sentences of each text (split off the event loop: pure Python), within the budget."""
        spans = await off_the_loop(lambda: [sentence_spans(t) for t in texts])
        count, limit = sum(map(len, spans)), self.settings.max_explain_sentences
        if count > limit:
            raise ExplanationTooLarge(
                f"Explaining this means explaining {count:,} sentences; one request may ask for at most {limit:,} "
                "(TEXTFLIX_MAX_EXPLAIN_SENTENCES). Send fewer or shorter texts, or leave out the explanations.",
                limit,
            )
        return spans

    def _explanation_cost(self, texts: list[str], spans: list[list[Span]], readers: list[dict[str, str]], lime: LimeConfig) -> int:
        """``analysis_cost`` of explaining ``texts``, their "what if" included (``whatif.cost``);
        ``ExplanationTooLarge`` if the server never takes that much."""
        cost = analysis_cost(texts, True, lime, spans) + self._reader_cost(texts, readers, True, lime) + whatif.cost(texts, lime)
        capacity = self.work.capacity
        if cost > capacity:
            raise ExplanationTooLarge(
                f"Explaining this ({sum(map(len, texts)):,} characters, {sum(map(len, spans)):,} sentences) takes "
                f"{cost:,} model passes of {FULL_TEXT_CHARS:,} characters; the server takes at most {capacity:,} "
                "at once (TEXTFLIX_MAX_WORK_IN_FLIGHT). Send fewer or shorter texts, or leave out the explanations.",
                capacity,
            )
        return cost

    def _readers(self, texts: list[str]) -> list[dict[str, str]]:
        """For each text, the network that reads it, by model (``read_by``; splitting it: pure Python, slow for long texts)."""
        return [{name: read_by(text) for name, read_by in self.read_by.items()} for text in texts]

    def _reader_cost(self, texts: list[str], readers: list[dict[str, str]], explain: bool, lime: LimeConfig) -> int:
        """What the texts a model hands to its teacher cost beyond what ``analysis_cost`` charges: the
        teacher reads a text in ``READER_COST`` times the student's time, for its prediction and, when
        it is explained, once more (its explanation scores it, and the empty text, which no network reads)."""
        alone = [text for text, read in zip(texts, readers) if TEACHER in read.values()]
        if not alone:
            return 0
        return (READER_COST - 1) * (2 if explain else 1) * analysis_cost(alone, False, lime)

    async def explain(self, text: str, spans: list[Span]) -> dict:
        """Sentence-level LIME of ``text``, cut into ``spans``, for both models (run side by side)."""
        await self.start()
        loop = asyncio.get_running_loop()
        names = list(self.batchers)
        call = LimeCall(loop)
        try:
            results = await asyncio.gather(
                *(loop.run_in_executor(self._lime, self._lime_one, text, spans, name, call) for name in names)
            )
        except BaseException:  # cancelled (the client left) or failed: stop the other LIME runs too
            call.cancel()
            raise
        by_model = dict(zip(names, results))
        sentences = [
            {
                "text": span.text,
                "start": span.start,
                "end": span.end,
                "weights": {name: finite(by_model[name].weights[i]) for name in names},
            }
            for i, span in enumerate(spans)
        ]
        explanations = {name: self._explanation_info(result) for name, result in by_model.items()}
        return {"sentences": sentences, "explanations": explanations}

    async def _what_ifs(
        self, texts: list[str], spans: list[list[Span]], p_positive: dict, explanations: list[dict]
    ) -> None:
        """``whatif.what_if`` of each explained text and model, added in place: each explanation's
        ``exact`` and ``flip`` (and ``start``, ``log_odds``), each sentence's ``contributions``, and
        an exact model's probability, the one its sentences' shares add up to."""
        loop = asyncio.get_running_loop()
        for name in p_positive:
            p_positive[name] = p_positive[name].astype(np.float64)
        for index, (text, text_spans, explained) in enumerate(zip(texts, spans, explanations)):
            names = list(self.batchers)
            read = [self.read_by[name](text) if name in self.read_by else None for name in names]
            sentences_read = await asyncio.gather(*(
                loop.run_in_executor(self._lime, self.readings[name].sentences_read, text) if name in self.readings
                else asyncio.sleep(0) for name in names
            ))  # fmt: skip
            answers = await asyncio.gather(*(
                whatif.what_if(
                    text, text_spans, float(p_positive[name][index]), explained["explanations"][name],
                    [s["weights"][name] for s in explained["sentences"]], self.batchers[name],
                    self.readings.get(name), by, sentences,
                )
                for name, by, sentences in zip(names, read, sentences_read)
            ))  # fmt: skip
            for name, (fields, contributions, p) in zip(names, answers):
                explained["explanations"][name].update(fields)
                p_positive[name][index] = p
                if contributions is not None:
                    for sentence, share in zip(explained["sentences"], contributions):
                        sentence.setdefault("contributions", {})[name] = share

    def _explanation_info(self, result) -> dict:
        quality = {key: finite_or_none(value) for key, value in result.quality.as_dict().items()}
        return {
            "samples": result.samples,
            "intercept": finite(result.intercept),
            "score": finite(result.score),
            "quality": quality,
            **assessment(result.score, quality),
        }

    def _lime_one(self, text: str, spans: list[Span], name: str, call: LimeCall):
        """LIME for one model, in a LIME thread; the model calls go through the batcher."""
        from model.explain import explain_sentences

        scorer = call.scorer(self.batchers[name])
        lime = self.settings.group(LimeConfig)
        return explain_sentences(text, spans, scorer, lime, self.reads_sentences.get(name, False))
