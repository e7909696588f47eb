"""Live analysis of new reviews: both models, and sentence-level LIME.

``ModelAnalyzer`` owns the trained models (loaded once, at start-up) and answers
``await analyzer.analyze(texts, explain)`` with one ``app.web.analysis_types.Analysis`` per text,
made once (``analysis_of``) when its reading is done: each model's prediction, and with ``explain``
the sentences with each model's weight and each model's explanation, with its "what if" (each
sentence's exact share of an additive model's log-odds and the fewest sentences that flip a
verdict, ``app.web.whatif``).

Each text is split into its sentences once per request (``sentence_spans``); its sentences
decide which network reads it (the model's ``read_by``), what the request costs
(``app.web.costs.request_cost``) and what is explained. A model's explanation of a text is
``model.explain.explain_review``'s, as the build's is.

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
import os
import random
import resource
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Protocol

import numpy as np

from app.settings import Settings
from app.web import whatif
from app.web.analysis_types import Analysis, AnalysisExplanation, AnalyzedSentence, ModelPrediction, PendingModel
from app.web.batching import BACKGROUND, CALL_WEIGHT, MicroBatcher, ProbaFn, SentencesProbaFn, WorkLimiter
from app.web.costs import analysis_cost, check_largest, explanation_cost, largest_request, request_cost, words_cost
from app.web.limits import off_the_loop
from app.web.word_sharing import WordSharer, served_words
from model.config import LimeConfig
from model.names import BERT, DISPLAY_NAMES, MODELS, label_of
from model.quality import ReviewExplanation
from model.sentences import Span, sentence_spans

if TYPE_CHECKING:
    from model.word_shares import SentenceWords

log = logging.getLogger("textflix")
# The shape of the model calls timed for the machine's speed: LIME's texts of the largest explanation the
# default limits allow (docs/benchmarks/worst-requests.md), about 36 sentences of 550 characters, each
# LIME text keeping about half of them.
SPEED_SENTENCES, SPEED_SENTENCE_WORDS = 36, 90
SPEED_TRIES = 3  # the call is timed this many times and the fastest kept: the machine's speed, not a moment's load


def analysis_of(
    text: str, spans: Sequence[Span] | None, p_positive: Mapping[str, float], read_by: Mapping[str, str],
    explanations: Mapping[str, ReviewExplanation], what_ifs: Mapping[str, "whatif.WhatIf"],
    pending: Mapping[str, PendingModel], words: Sequence["SentenceWords"] | None = None,
) -> Analysis:
    """The one value of ``text``'s analysis: each model's prediction (``p_positive``, the network that read it
    when ``read_by`` says), or what a ``pending`` model says; explained (``spans`` not None), its sentences
    with each model's weight and exact share (and BERT's ``words`` of each, when given), and each model's
    explanation with its "what if"."""
    predictions = {
        model: pending.get(model) or ModelPrediction(
            label=label_of(p_positive[model]), p_positive=p_positive[model],
            **({"read_by": read_by[model]} if model in read_by else {}),
        )
        for model in MODELS
    }  # fmt: skip
    if spans is None:
        return Analysis(predictions=predictions)
    exact = {model: what_if.contributions for model, what_if in what_ifs.items() if what_if.contributions is not None}
    sentences = [
        AnalyzedSentence(
            text=span.text, start=span.start, end=span.end,
            weights={model: explanations[model].weights[i] if model in explanations else None for model in MODELS},
            **({"contributions": {model: shares[i] for model, shares in exact.items()}} if exact else {}),
            **({"words": {BERT: served_words(words[i])}} if words is not None else {}),
        )
        for i, span in enumerate(spans)
    ]  # fmt: skip
    explained = {
        model: pending.get(model) or AnalysisExplanation(**explanations[model].figures(), **what_ifs[model].fields)
        for model in MODELS
    }
    return Analysis(text=text, predictions=predictions, sentences=sentences, explanations=explained)


class Analyzer(Protocol):
    """What the pages and the API analyse reviews with."""

    problem: str | None  # why it cannot analyse (the models are not loaded), or None

    async def analyze(self, texts: list[str], explain: bool, words: bool = False) -> list[Analysis]: ...

    def info(self) -> dict: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class NoModels:
    """The analyzer when the models cannot be loaded: the pages and the API say why."""

    def __init__(self, problem: str):
        self.problem = problem

    async def analyze(self, texts: list[str], explain: bool, words: bool = False) -> list[Analysis]:
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
    from model.served import load_served
    from model.trained import ModelUnavailable, load_trained, model_dir

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
    call_weight = settings.batch_max_weight or CALL_WEIGHT[device.type]
    seconds_per_pass = measured_seconds_per_pass(loaded, call_weight)
    name = str(device)
    if device.type == "cuda":
        import torch

        name = f"{device} ({torch.cuda.get_device_name(device)})"
    log.info(
        "%s loaded from %s on %s in %.1f s; this server process (pid %d) holds %s MB of memory at its peak.",
        " and ".join(map(DISPLAY_NAMES.get, models)), settings.models_dir, name, time.perf_counter() - started,
        os.getpid(), f"{peak_memory_mb():,.0f}",
    )  # fmt: skip
    analyzer = analyzer_of(loaded, settings, name, call_weight, seconds_per_pass)
    if BERT in loaded:  # its own copy, for Captum to differentiate (``app.web.word_sharing``), loaded when first asked
        analyzer.words = WordSharer(partial(load_served, model_dir(settings.models_dir, BERT), device, settings.inference_max_tokens))
    log.info("Limits on this machine: %s.", limits_line(analyzer.info()["limits"]))
    return analyzer


def limits_line(limits: dict) -> str:
    """The work limits of ``ModelAnalyzer.info``, in words, for the log."""
    return (
        f"a model pass takes {limits['seconds_per_pass'] * 1000:.1f} ms (measured), so one request may take "
        f"{limits['largest_request_passes']:,} passes (about {limits['largest_request_s']:.0f} s) of the "
        f"{limits['max_work_in_flight']:,} for requests over {limits['small_request_passes']:,}; "
        f"{limits['small_work_in_flight']:,} passes are kept for those up to it"
    )


def measured_seconds_per_pass(loaded: dict, call_weight: float) -> float:
    """This machine's seconds per model pass (``app.web.costs``) of an explanation: one model call of
    ``call_weight`` LIME texts shaped like the largest explanation's (``SPEED_SENTENCES``) timed per model
    (the fastest of ``SPEED_TRIES``), summed over the models (a request's models share the cores), over the call's charge."""
    from model.trained import sentence_scorer

    rng = random.Random(0)
    words = "film story acting plot great boring wonderful awful slow funny music scenes ending".split()
    sentences = [" ".join(rng.choices(words, k=SPEED_SENTENCE_WORDS)).capitalize() + "." for _ in range(SPEED_SENTENCES)]
    samples = [[s for s in sentences if rng.random() < 0.5] for _ in range(max(1, int(call_weight)))]
    passes = analysis_cost([" ".join(kept) for kept in samples], False, LimeConfig())
    seconds = 0.0
    for model in loaded.values():
        by_sentences = sentence_scorer(model)
        call = (by_sentences, samples) if by_sentences else (model.predict_proba, [" ".join(kept) for kept in samples])
        seconds += min(timed(*call) for _ in range(SPEED_TRIES))
    return seconds / passes


def timed(predict: ProbaFn | SentencesProbaFn, texts: list) -> float:
    started = time.perf_counter()
    predict(texts)
    return time.perf_counter() - started


def analyzer_of(
    loaded: dict, settings: Settings, device: str = "cpu", call_weight: float = 8, seconds_per_pass: float | None = None
) -> "ModelAnalyzer":
    """A ``ModelAnalyzer`` of trained models (``model.trained.Classifier``, by name): LIME's texts go as
    their sentences to a model that reads sentences (its ``proba_of_sentences``), and a BERT that hands some
    texts to its teacher says which network read each (``OneSentenceRouter.read_by``)."""
    from model.trained import sentence_scorer

    return ModelAnalyzer(
        {name: model.predict_proba for name, model in loaded.items()},
        settings,
        device,
        call_weight,
        seconds_per_pass,
        sentence_models={name: sentence_scorer(model) for name, model in loaded.items() if model.reads_sentences},
        read_by={name: model.read_by for name, model in loaded.items() if getattr(model, "one_sentence_reader", None)},
        readings={
            name: whatif.Reading(model.sentences_read, model.length_scale)
            for name, model in loaded.items() if model.reads_sentences
        },
    )


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

    def scorers(self, batcher: MicroBatcher) -> tuple[ProbaFn, SentencesProbaFn | None]:
        """A ``predict_proba`` for LIME (run in a LIME thread) that goes through ``batcher``, and, for a
        model that reads sentences, a ``proba_of_sentences`` that does too."""

        def predict(texts: list[str]) -> np.ndarray:
            return self._result(batcher(texts, BACKGROUND))

        def by_sentences(texts: list[list[str]]) -> np.ndarray:
            return self._result(batcher.sentences(texts, BACKGROUND))

        return predict, by_sentences if batcher.reads_sentences else None

    def _result(self, scoring) -> np.ndarray:
        """What the ``scoring`` coroutine returns, run on the event loop, unless the call is cancelled."""
        future = asyncio.run_coroutine_threadsafe(scoring, self.loop)
        with self._lock:
            self._pending.add(future)
        try:
            if self._cancelled.is_set():
                future.cancel()
            return future.result()  # CancelledError ends the LIME run once the call is cancelled
        finally:
            with self._lock:
                self._pending.discard(future)

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
        seconds_per_pass: float | None = None,
        sentence_models: dict[str, SentencesProbaFn] | None = None,
        read_by: dict[str, Callable[[Sequence[Span]], str]] | None = None,
        readings: dict[str, "whatif.Reading"] | None = None,
    ):
        """``seconds_per_pass``: this machine's measured speed (``measured_seconds_per_pass``), which bounds the
        largest request (``app.web.costs.largest_request``; None: not measured, ``max_work_in_flight``);
        ``sentence_models``: the ``proba_of_sentences`` of the models that read a text as its sentences
        (LIME's texts and the what-if's sentences go to them so); ``read_by``: for a model that hands some texts to another network, which reads a text
        of the given sentences; ``readings``: how the models that read a text as the sum of its sentences
        do (``whatif.Reading``)."""
        self.settings = settings
        self.read_by = read_by or {}
        self.readings = readings or {}
        self.device = device
        window = settings.batch_window_ms / 1000.0
        self.batchers = {
            name: MicroBatcher(
                name, models[name], window, settings.batch_max_texts, call_weight, (sentence_models or {}).get(name)
            )
            for name in MODELS
            if name in models  # a model not ready yet has none (``app.web.ready_analyzer``)
        }
        self.seconds_per_pass = seconds_per_pass
        largest = largest_request(settings, seconds_per_pass)
        self.work = WorkLimiter(settings.max_work_in_flight, settings.small_work_in_flight, largest)
        self._lime: ThreadPoolExecutor | None = None
        self.words: WordSharer | None = None  # BERT's word shares, where BERT is loaded (``load_analyzer``)

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
        if self.words is not None:
            self.words.stop()

    def info(self) -> dict:
        return {
            "device": self.device,
            "batch_window_ms": self.settings.batch_window_ms,
            "batching": self.settings.batch_window_ms > 0,
            "model_calls": {name: b.calls for name, b in self.batchers.items()},
            "work_in_flight": self.work.in_flight,
            "limits": self.limits(),
        }

    def limits(self) -> dict:
        """What the work limits are on this machine (``WorkLimiter``), and the speed they are sized from."""
        work, speed = self.work, self.seconds_per_pass
        return {
            "max_work_in_flight": work.capacity,
            "small_work_in_flight": work.small_capacity,
            "small_request_passes": work.small_request,
            "largest_request_passes": work.largest_request,
            "seconds_per_pass": speed,
            "largest_request_s": None if speed is None else round(work.largest_request * speed, 1),
        }

    # -- analysis --------------------------------------------------------------

    async def predict(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Positive-class probability of every text, per model."""
        names = list(self.batchers)
        probs = await asyncio.gather(*(self.batchers[name](texts) for name in names))
        return {name: p[:, 1] for name, p in zip(names, probs)}

    async def analyze(
        self, texts: list[str], explain: bool, pending: Mapping[str, PendingModel] | None = None, words: bool = False
    ) -> list[Analysis]:
        """Both models' analysis of ``texts`` (``analysis_of``; each model not loaded says what ``pending``
        says of it), explained with BERT's ``words`` where it is loaded; ``ServerBusy`` when over capacity,
        ``ExplanationTooLarge`` when the texts have more sentences than one request may explain, or their
        explanations more work than the server takes at once."""
        texts, lime, pending = list(texts), self.settings.group(LimeConfig), pending or {}
        words = words and explain and self.words is not None
        spans, readers = None, [{} for _ in texts]
        # The texts' own passes first, before they are split (a request refused then costs no splitting: 64
        # texts take seconds), then what their readers add, then their explanations' once the texts are checked.
        async with self.work.admit(request_cost(texts, spans, readers, False, lime)) as reserve:
            if explain or self.read_by:  # its sentences decide its explanation, or which network reads it
                spans, readers = await off_the_loop(self._read, texts, explain)
                reserve(request_cost(texts, spans, readers, False, lime))
            if explain:  # side by side, so the texts and LIME's samples can share model calls
                largest, sentences = self.work.largest_request, self.settings.max_explain_sentences
                reserve(explanation_cost(texts, spans, readers, lime, sentences, largest, self.seconds_per_pass, words))
                p_positive, *explanations = await asyncio.gather(
                    self.predict(texts), *(self.explain(text, text_spans) for text, text_spans in zip(texts, spans))
                )
                what_ifs = await self._what_ifs(texts, spans, readers, p_positive, explanations)
                shares = [await self.words.shares(text, text_spans) for text, text_spans in zip(texts, spans)] if words else None
            else:
                p_positive, explanations, what_ifs = await self.predict(texts), [{} for _ in texts], [{} for _ in texts]
        reported = [  # an exact model reports the probability its sentences' shares add up to
            {name: what_ifs[index][name].p_positive if explain else float(p[index]) for name, p in p_positive.items()}
            for index in range(len(texts))
        ]
        return [
            analysis_of(
                text, spans[index] if explain else None, reported[index], readers[index], explanations[index],
                what_ifs[index], pending, shares[index] if words else None,
            )
            for index, text in enumerate(texts)
        ]  # fmt: skip

    async def review_words(self, text: str, spans: list[Span]) -> "list[SentenceWords] | None":
        """BERT's word shares of a stored review's ``text``, cut into its stored ``spans``, admitted as a request
        (``app.web.costs.words_cost``): ``ExplanationTooLarge`` when they cost more than the server takes of one."""
        readers = [{name: read_by(spans) for name, read_by in self.read_by.items()}]
        cost = words_cost([spans], readers)
        check_largest(
            cost, self.work.largest_request, self.seconds_per_pass,
            f"BERT's words of this review ({len(text):,} characters, {len(spans):,} sentences)", "or a shorter review",
        )  # fmt: skip
        async with self.work.admit(cost):
            return await self.words.shares(text, spans)

    def _read(self, texts: list[str], explain: bool) -> tuple[list[list[Span]] | None, list[dict[str, str]]]:
        """Each text split once (pure Python, slow for long texts: run it off the event loop): its sentences,
        kept when it is explained (unexplained, dropped text by text: 64 texts may have hundreds of thousands),
        and the network that reads it, by model that hands some texts to another (``read_by``): what the API
        reports, and what the request is charged."""
        spans, readers = [], []
        for text in texts:
            text_spans = sentence_spans(text)
            readers.append({name: read_by(text_spans) for name, read_by in self.read_by.items()})
            if explain:
                spans.append(text_spans)
        return (spans if explain else None), readers

    async def explain(self, text: str, spans: list[Span], names: Sequence[str] | None = None) -> dict[str, ReviewExplanation]:
        """Each model's (of ``names``; all by default) sentence explanation of ``text``, cut into ``spans``
        (``model.explain.explain_review``), run side by side in LIME threads."""
        await self.start()
        loop = asyncio.get_running_loop()
        names = list(names or self.batchers)
        call = LimeCall(loop)
        try:
            found = await asyncio.gather(
                *(loop.run_in_executor(self._lime, self._lime_one, text, spans, name, call) for name in names)
            )
        except BaseException:  # cancelled (the client left) or failed: stop the other LIME runs too
            call.cancel()
            raise
        return dict(zip(names, found))

    async def _what_ifs(
        self, texts: list[str], spans: list[list[Span]], readers: list[dict[str, str]], p_positive: dict,
        explanations: list[dict[str, ReviewExplanation]],
    ) -> list[dict[str, "whatif.WhatIf"]]:
        """``whatif.what_if`` of each explained text, by model."""
        loop = asyncio.get_running_loop()
        found = []
        for index, (text, text_spans, explained) in enumerate(zip(texts, spans, explanations)):
            names = list(self.batchers)
            read = [readers[index].get(name) for name in names]
            sentences_read = await asyncio.gather(*(
                loop.run_in_executor(self._lime, self.readings[name].sentences_read, text_spans) if name in self.readings
                else asyncio.sleep(0) for name in names
            ))  # fmt: skip
            answers = await asyncio.gather(*(
                whatif.what_if(
                    text, text_spans, float(p_positive[name][index]), explained[name], self.batchers[name],
                    self.readings.get(name), by, sentences,
                )
                for name, by, sentences in zip(names, read, sentences_read)
            ))  # fmt: skip
            found.append(dict(zip(names, answers)))
        return found

    def _lime_one(self, text: str, spans: list[Span], name: str, call: LimeCall) -> ReviewExplanation:
        """``explain_review`` for one model, in a LIME thread; the model calls go through the batcher."""
        from model.explain import explain_review

        predict, proba_of_sentences = call.scorers(self.batchers[name])
        return explain_review(text, spans, predict, self.settings.group(LimeConfig), proba_of_sentences)
