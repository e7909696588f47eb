"""Live analysis of new reviews: both models, micro-batched inference, sentence-level LIME.

``ModelAnalyzer`` owns the trained models (loaded once, at start-up) and answers
``await analyzer.analyze(texts, explain)`` with, per text::

    {"predictions": {"nbsvm": {"label": "positive", "p_positive": 0.81}, "bert": {...}},
     "sentences": [{"text": ..., "start": 0, "end": 25, "weights": {"nbsvm": 0.2, "bert": 0.4}}],
     "explanations": {"nbsvm": {"samples": 64, "intercept": ..., "score": ...}, "bert": {...}}}

(``sentences`` and ``explanations`` only with ``explain``.)

Each model sits behind a ``MicroBatcher``: requests put their texts on a priority queue;
one collector task takes the first, waits ``batch_window_ms`` for others (only while
requests overlap), and runs them all as one model call in the model's own worker
thread, so the event loop never waits on a model and torch is never called from two
threads at once. Model calls are kept short, a request's own texts go before LIME's
perturbed texts (one call per explanation, deduplicated, run in a thread pool), and
small calls before large ones, so a short prediction never waits long behind others.

Work is bounded: every analysis reserves its model passes (``analysis_cost``) from
``WorkLimiter``, and beyond ``max_work_in_flight`` a request is refused at once with
``ServerBusy`` (429 and a Retry-After) instead of queueing without end. Cancelling an
analysis (its client went away) drops its queued texts and stops its LIME threads.

The pages and the API see it through the ``Analyzer`` protocol; when the models cannot
be loaded, ``NoModels`` stands in and says why.
"""

import asyncio
import collections
import concurrent.futures
import heapq
import itertools
import logging
import math
import os
import resource
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Protocol

import numpy as np

from app.settings import Settings
from app.web.errors import ServerBusy, ServerStopping
from model.config import SENTENCE_WINDOWS, LimeConfig
from model.names import DISPLAY_NAMES, MODELS, label_of
from model.quality import assessment
from model.sentences import Span, split_sentences

log = logging.getLogger("textflix")
ProbaFn = Callable[[list[str]], np.ndarray]
URGENT, BACKGROUND = 0, 1  # a request's own texts; LIME's perturbed texts
FULL_TEXT_CHARS = 1000  # about the characters that fill BERT's window of 256 tokens
TEXT_OVERHEAD_CHARS = 10  # what a text costs a model call besides its characters (``text_weight``'s least)
# Full-length texts per model call by default: one forward pass on CPU (2048 tokens), a large batch on CUDA.
CALL_WEIGHT = {"cpu": 8, "cuda": 256}
# What a text longer than BERT's window counts for at most: a request's text, the windows a sentence
# model reads of a text; LIME's, one, for they are made of one text's sentences, and a model call
# reads a sentence that several of its texts share once.
LONGEST_WEIGHT = {URGENT: SENTENCE_WINDOWS, BACKGROUND: 1.0}


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


def text_weight(text: str, most: float) -> float:
    """How much of a model call a text takes: 1 when it fills BERT's window, less when shorter, and
    up to ``most`` when longer."""
    return max(0.01, min(most, len(text) / FULL_TEXT_CHARS))


def analysis_cost(
    texts: Sequence[str], explain: bool, lime: LimeConfig, sentences: Sequence[Sequence[Span]] | None = None
) -> int:
    """Model passes an analysis is expected to need per model, a pass being a full-length text
    (``FULL_TEXT_CHARS`` characters; each text counts ``TEXT_OVERHEAD_CHARS`` more): each text
    once and, for each explained text, the distinct texts its explanation scores
    (``model.explain.expected_work``), which depend on its sentences: with ``explain``,
    ``sentences`` holds the spans of each text."""
    from model.explain import expected_work

    count, chars = float(len(texts)), float(sum(map(len, texts)))
    if explain:
        if sentences is None:
            raise ValueError("the cost of an explanation depends on the sentences of its texts: pass them")
        for text, spans in zip(texts, sentences, strict=True):
            more_texts, more_chars = expected_work(text, spans, lime)
            count, chars = count + more_texts, chars + more_chars
    return math.ceil((chars + TEXT_OVERHEAD_CHARS * count) / FULL_TEXT_CHARS)


class ExplanationTooLarge(Exception):
    """The texts of one request have more sentences than ``max_explain_sentences``, or more
    work than the server takes at once; ``limit`` is the limit it is over."""

    def __init__(self, message: str, limit: int):
        self.limit = limit
        super().__init__(message)


class WorkLimiter:
    """Admits analyses while their model passes in flight stay within ``capacity``."""

    WINDOW_S = 30.0  # throughput, for Retry-After, is measured over this many seconds

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.in_flight = 0
        self._done: collections.deque[tuple[float, int]] = collections.deque()

    @asynccontextmanager
    async def admit(self, cost: int):
        """Reserves ``cost`` model passes for the block, which gets a function that raises the
        reservation to a new total once it knows more (``ServerBusy`` if that does not fit)."""
        held = 0

        def reserve(total: int) -> None:
            nonlocal held
            others = self.in_flight - held
            if others + total > self.capacity:
                raise ServerBusy(
                    f"The server is busy with {others:,} model passes of other analyses; this one needs "
                    f"{total:,} and the limit is {self.capacity:,} (TEXTFLIX_MAX_WORK_IN_FLIGHT). Retry shortly.",
                    self.retry_after(others + total - self.capacity),
                )
            self.in_flight += total - held
            held = total

        reserve(cost)
        try:
            yield reserve
            self._done.append((time.monotonic(), held))
        finally:
            self.in_flight -= held

    def retry_after(self, excess: int) -> int:
        """Seconds until ``excess`` model passes more are likely to fit, from the throughput of the last half minute."""
        now = time.monotonic()
        while self._done and self._done[0][0] < now - self.WINDOW_S:
            self._done.popleft()
        rate = sum(units for _, units in self._done) / self.WINDOW_S
        return 5 if rate == 0 else max(1, min(60, math.ceil(excess / rate)))


class MicroBatcher:
    """Gathers concurrent calls of one model into batched calls in one worker thread.

    ``await batcher(texts, priority)`` returns the model's class probabilities, one row
    per text. A call is cut into pieces of at most ``call_weight`` full-length texts
    (``text_weight``: shorter texts count for less, longer ones up to ``LONGEST_WEIGHT``),
    and a model call takes at most that much too, so that it stays short: it cannot be
    interrupted, and a newly arrived call waits for at most the one that is running. Waiting
    pieces go most urgent first (a request's own texts before LIME's), then smallest first,
    then oldest. A batch of URGENT pieces waits up to ``window_s`` seconds (0: batching off,
    one piece per model call) for company, only while calls overlap (the last batch had
    several, or more are queued), so a lone request at low load pays no delay, and no longer
    than it takes to fill a model call. Texts are deduplicated within a batch; cancelled calls are dropped.
    """

    def __init__(self, name: str, predict: ProbaFn, window_s: float, max_texts: int, call_weight: float = 8):
        self.name = name
        self.predict = predict
        self.window_s = window_s
        self.max_texts = max_texts
        self.call_weight = call_weight
        self.calls = 0  # model calls made, and texts sent to the model (after dedup)
        self.texts = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        # A heap of (priority, weight, arrival, texts, future): most urgent, then lightest, then oldest.
        self._waiting: list[tuple[int, float, int, list[str], asyncio.Future]] = []
        self._arrived: asyncio.Event | None = None
        self._arrival = itertools.count()
        self._task: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._in_flight: list[tuple[list[str], asyncio.Future]] = []
        self._contended = False  # did the last batch have company (several calls, or more waiting)?

    def _ensure_started(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is loop and self._task is not None and not self._task.done():
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"textflix-{self.name}")
        self._loop = loop
        self._arrived = asyncio.Event()
        self._task = loop.create_task(self._collect(), name=f"textflix-batcher-{self.name}")

    async def __call__(self, texts: Sequence[str], priority: int = URGENT) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.empty((0, 2), dtype=np.float32)
        self._ensure_started()
        futures = []
        for piece, weight in self._pieces(texts, LONGEST_WEIGHT[priority]):
            futures.append(self._loop.create_future())
            heapq.heappush(self._waiting, (priority, weight, next(self._arrival), piece, futures[-1]))
        self._arrived.set()
        return np.concatenate(await asyncio.gather(*futures))

    def _pieces(self, texts: list[str], longest: float) -> list[tuple[list[str], float]]:
        """``texts`` cut into pieces of at most ``call_weight``, with their weights (a text's at most ``longest``)."""
        pieces: list[tuple[list[str], float]] = [([], 0.0)]
        for text in texts:
            weight = text_weight(text, longest)
            piece, total = pieces[-1]
            if piece and (total + weight > self.call_weight or len(piece) == self.max_texts):
                pieces.append(([], 0.0))
                piece, total = pieces[-1]
            piece.append(text)
            pieces[-1] = (piece, total + weight)
        return pieces

    async def _collect(self) -> None:
        waiting, loop = self._waiting, asyncio.get_running_loop()
        while True:
            while not waiting:
                self._arrived.clear()
                await self._arrived.wait()
            if waiting[0][0] == URGENT and self.window_s > 0 and (self._contended or len(waiting) > 1):
                # Wait for company only while requests overlap: a lone request at low load goes
                # straight to the model instead of paying the window.
                await self._wait_for_company(loop.time() + self.window_s)
            live = self._take_batch()
            if not live:
                continue
            self._in_flight = live
            try:
                await self._run(live, loop)
            finally:
                self._in_flight = []
            self._contended = len(live) > 1 or bool(waiting)

    async def _wait_for_company(self, deadline: float) -> None:
        """Until ``deadline``, or until the urgent pieces waiting fill a model call: the model
        then has its batch and would only sit idle for the rest of the window."""
        while not self._urgent_call_full():
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), deadline - self._loop.time())
            except TimeoutError:
                return

    def _urgent_call_full(self) -> bool:
        urgent = [(weight, len(texts)) for priority, weight, _, texts, _ in self._waiting if priority == URGENT]
        return sum(w for w, _ in urgent) >= self.call_weight or sum(n for _, n in urgent) >= self.max_texts

    def _take_batch(self) -> list[tuple[list[str], asyncio.Future]]:
        """The pieces at the head of the queue that fit in one model call, cancelled ones dropped."""
        priority = self._waiting[0][0]
        batch, weight, count = [], 0.0, 0
        while self._waiting and self._waiting[0][0] == priority:
            _, piece_weight, _, texts, future = self._waiting[0]
            full = weight + piece_weight > self.call_weight or count + len(texts) > self.max_texts
            if batch and (full or self.window_s == 0):  # window 0: batching off
                break
            heapq.heappop(self._waiting)
            if not future.done():
                batch.append((texts, future))
                weight, count = weight + piece_weight, count + len(texts)
        return batch

    async def _run(self, live: list[tuple[list[str], asyncio.Future]], loop: asyncio.AbstractEventLoop) -> None:
        """One model call for every caller in ``live``; each caller gets its rows or the error."""
        unique: dict[str, int] = {}
        rows = [[unique.setdefault(text, len(unique)) for text in texts] for texts, _ in live]
        try:
            probs = await loop.run_in_executor(self._executor, self.predict, list(unique))
            if len(probs) != len(unique):
                raise RuntimeError(f"{self.name} returned {len(probs)} rows for {len(unique)} texts")
        except Exception as error:
            if len(live) > 1:  # find the culprit: the others should not fail with it
                for item in live:
                    await self._run([item], loop)
                return
            log.exception("%s failed on %d texts", self.name, len(unique))
            if not live[0][1].done():
                live[0][1].set_exception(error)
            return
        self.calls += 1
        self.texts += len(unique)
        for (_, future), index in zip(live, rows):
            if not future.done():
                future.set_result(probs[index])

    async def stop(self) -> None:
        """Stop collecting; callers still waiting are told the server is stopping."""
        pending = list(self._in_flight)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        pending += [(texts, future) for *_, texts, future in self._waiting]
        self._waiting.clear()
        for _, future in pending:
            if not future.done():
                future.set_exception(ServerStopping())
        self._task = None
        self._in_flight = []
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


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


def load_analyzer(settings: Settings) -> Analyzer:
    """The models of ``settings.models_dir`` behind a ``ModelAnalyzer``, or ``NoModels`` saying why not."""
    from model.bert import resolve_device
    from model.trained import ModelUnavailable, load_trained

    started = time.perf_counter()
    if settings.inference_threads:
        import torch

        torch.set_num_threads(settings.inference_threads)
    try:
        device = resolve_device(settings.device)
        models = {
            name: load_trained(
                name, settings.models_dir, device, settings.inference_max_tokens, settings.cpu_int8
            ).predict_proba
            for name in MODELS
        }
    except ModelUnavailable as error:
        log.error("The API cannot analyse reviews: %s The pages still serve the database.", error)
        # What clients are told: no paths, no exception text (those are in the log).
        return NoModels(f"the {DISPLAY_NAMES[error.model]} model is missing or damaged; run `textflix build` to train it.")
    for predict in models.values():  # warm up (CUDA context, kernels, caches) before the first request
        predict(["A warm-up sentence. It was fine."])
    name = str(device)
    if device.type == "cuda":
        import torch

        name = f"{device} ({torch.cuda.get_device_name(device)})"
    log.info(
        "Models loaded from %s on %s in %.1f s; this server process (pid %d) holds %s MB of memory at its peak.",
        settings.models_dir, name, time.perf_counter() - started, os.getpid(), f"{peak_memory_mb():,.0f}",
    )  # fmt: skip
    return ModelAnalyzer(models, settings, name, settings.batch_max_weight or CALL_WEIGHT[device.type])


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

    def __init__(self, models: dict[str, ProbaFn], settings: Settings, device: str = "cpu", call_weight: float = 8):
        self.settings = settings
        self.device = device
        window = settings.batch_window_ms / 1000.0
        self.batchers = {
            name: MicroBatcher(name, models[name], window, settings.batch_max_texts, call_weight) for name in MODELS
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
        # The texts' own passes first: what the explanations cost is known once the texts are split.
        async with self.work.admit(analysis_cost(texts, False, lime)) as reserve:
            if explain:  # side by side, so the texts and LIME's samples can share model calls
                spans = await self._sentences(texts)
                reserve(self._explanation_cost(texts, spans, lime))
                p_positive, *explanations = await asyncio.gather(
                    self.predict(texts), *(self.explain(text, text_spans) for text, text_spans in zip(texts, spans))
                )
            else:
                p_positive, explanations = await self.predict(texts), []
        results = []
        for index in range(len(texts)):
            predictions = {}
            for name in self.batchers:
                p = float(p_positive[name][index])
                predictions[name] = {"label": label_of(p), "p_positive": p}
            results.append({"predictions": predictions})
        for result, explanation in zip(results, explanations):
            result.update(explanation)
        return results

    async def _sentences(self, texts: list[str]) -> list[list[Span]]:
        """The sentences of each text, split in a LIME thread (splitting is pure Python), within the budget."""
        await self.start()
        spans = await asyncio.get_running_loop().run_in_executor(self._lime, lambda: [sentence_spans(t) for t in texts])
        count, limit = sum(map(len, spans)), self.settings.max_explain_sentences
        if count > limit:
            raise ExplanationTooLarge(
                f"Explaining this means explaining {count:,} sentences; one request may ask for at most {limit:,} "
                "(TEXTFLIX_MAX_EXPLAIN_SENTENCES). Send fewer or shorter texts, or leave out the explanations.",
                limit,
            )
        return spans

    def _explanation_cost(self, texts: list[str], spans: list[list[Span]], lime: LimeConfig) -> int:
        """``analysis_cost`` of explaining ``texts``; ``ExplanationTooLarge`` if the server never takes that much."""
        cost, capacity = analysis_cost(texts, True, lime, spans), self.work.capacity
        if cost > capacity:
            raise ExplanationTooLarge(
                f"Explaining this ({sum(map(len, texts)):,} characters, {sum(map(len, spans)):,} sentences) takes "
                f"{cost:,} model passes of {FULL_TEXT_CHARS:,} characters; the server takes at most {capacity:,} "
                "at once (TEXTFLIX_MAX_WORK_IN_FLIGHT). Send fewer or shorter texts, or leave out the explanations.",
                capacity,
            )
        return cost

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

    def _explanation_info(self, result) -> dict:
        quality = {key: finite_or_none(value) for key, value in result.quality.as_dict().items()}
        return {
            "samples": self.settings.lime_samples,
            "intercept": finite(result.intercept),
            "score": finite(result.score),
            "quality": quality,
            **assessment(result.score, quality),
        }

    def _lime_one(self, text: str, spans: list[Span], name: str, call: LimeCall):
        """LIME for one model, in a LIME thread; the model calls go through the batcher."""
        from model.explain import explain_sentences

        scorer = call.scorer(self.batchers[name])
        return explain_sentences(text, spans, scorer, self.settings.group(LimeConfig))
