"""Live analysis of new reviews: both models, micro-batched inference, sentence-level LIME.

``ModelAnalyzer`` owns the trained models (loaded once, at start-up) and answers
``await analyzer.analyze(texts, explain)`` with, per text::

    {"predictions": {"nbsvm": {"label": "positive", "p_positive": 0.81}, "bert": {...}},
     "sentences": [{"text": ..., "start": 0, "end": 25, "weights": {"nbsvm": 0.2, "bert": 0.4}}],
     "explanations": {"nbsvm": {"samples": 64, "intercept": ..., "score": ...}, "bert": {...}}}

(``sentences`` and ``explanations`` only with ``explain``.)

Each model sits behind a ``MicroBatcher``: requests put their texts on an asyncio queue;
one collector task takes the first, waits ``batch_window_ms`` for others (only while
requests overlap), and runs them all as one model call in the model's own single worker thread, so the event loop never
waits on a model and torch is never called from two threads at once. While one call
runs, the next requests queue up and go together in the following call, so throughput
grows with concurrency. LIME runs in a thread pool; its perturbed texts (one call per
explanation, deduplicated) go through the same batchers, so the explanations of
concurrent requests share model calls too.

The pages and the API see it through the ``Analyzer`` protocol; when the models cannot
be loaded, ``NoModels`` stands in and says why.
"""

import asyncio
import logging
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np

from app.settings import Settings
from model.names import MODELS, label_of
from model.sentences import Span, split_sentences

log = logging.getLogger("textflix")
ProbaFn = Callable[[list[str]], np.ndarray]
LIME_WAIT_S = 600.0  # a LIME thread gives up on a model call after this long (server stopping)


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


class MicroBatcher:
    """Gathers concurrent calls of one model into batched calls in one worker thread.

    ``await batcher(texts)`` returns the model's class probabilities, one row per text.
    The first waiting call opens a batch; the collector then waits ``window_s`` seconds
    (0: batching off, one call per request) and takes every call queued by then, up to
    ``max_texts`` texts, deduplicates the texts and runs the model once. The window is
    waited only while calls overlap (the last batch had several, or more are queued), so
    a lone request at low load pays no delay; calls that arrive while the model is busy
    queue up and go together in the next batch either way.
    """

    def __init__(self, name: str, predict: ProbaFn, window_s: float, max_texts: int):
        self.name = name
        self.predict = predict
        self.window_s = window_s
        self.max_texts = max_texts
        self.calls = 0  # model calls made, and texts sent to the model (after dedup)
        self.texts = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None
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
        self._queue = asyncio.Queue()
        self._task = loop.create_task(self._collect(), name=f"textflix-batcher-{self.name}")

    async def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.empty((0, 2), dtype=np.float32)
        self._ensure_started()
        future = self._loop.create_future()
        self._queue.put_nowait((texts, future))
        return await future

    async def _collect(self) -> None:
        queue = self._queue
        loop = asyncio.get_running_loop()
        while True:
            batch = [await queue.get()]
            size = len(batch[0][0])
            if self.window_s > 0:
                # Wait for company only while requests overlap: a lone request at low load goes
                # straight to the model instead of paying the window.
                if size < self.max_texts and (self._contended or not queue.empty()):
                    await asyncio.sleep(self.window_s)
                while size < self.max_texts and not queue.empty():
                    item = queue.get_nowait()
                    batch.append(item)
                    size += len(item[0])
            live = [item for item in batch if not item[1].done()]
            if not live:
                continue
            self._in_flight = live
            try:
                await self._run(live, loop)
            finally:
                self._in_flight = []
            self._contended = len(live) > 1 or not queue.empty()

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
        while self._queue is not None and not self._queue.empty():
            pending.append(self._queue.get_nowait())
        for _, future in pending:
            if not future.done():
                future.set_exception(RuntimeError("The server is stopping."))
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
    try:
        device = resolve_device(settings.device)
        models = {
            name: load_trained(name, settings.models_dir, device, settings.inference_max_tokens).predict_proba
            for name in MODELS
        }
    except ModelUnavailable as error:
        log.error("The API cannot analyse reviews: %s The pages still serve the database.", error)
        return NoModels(str(error))
    for predict in models.values():  # warm up (CUDA context, kernels, caches) before the first request
        predict(["A warm-up sentence. It was fine."])
    name = str(device)
    if device.type == "cuda":
        import torch

        name = f"{device} ({torch.cuda.get_device_name(device)})"
    log.info("Models loaded from %s on %s in %.1f s.", settings.models_dir, name, time.perf_counter() - started)
    return ModelAnalyzer(models, settings, name)


class ModelAnalyzer:
    """The loaded models, their micro-batchers and LIME, for the API and the /analyze page."""

    problem: str | None = None

    def __init__(self, models: dict[str, ProbaFn], settings: Settings, device: str = "cpu"):
        self.settings = settings
        self.device = device
        window = settings.batch_window_ms / 1000.0
        self.batchers = {
            name: MicroBatcher(name, models[name], window, settings.batch_max_texts) for name in MODELS
        }
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
        }

    # -- analysis --------------------------------------------------------------

    async def predict(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Positive-class probability of every text, per model."""
        names = list(self.batchers)
        probs = await asyncio.gather(*(self.batchers[name](texts) for name in names))
        return {name: p[:, 1] for name, p in zip(names, probs)}

    async def analyze(self, texts: list[str], explain: bool) -> list[dict]:
        texts = list(texts)
        if explain:  # side by side, so the texts and LIME's samples can share model calls
            p_positive, *explanations = await asyncio.gather(
                self.predict(texts), *(self.explain(text) for text in texts)
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

    async def explain(self, text: str) -> dict:
        """Sentence-level LIME of ``text`` for both models (run side by side)."""
        await self.start()
        loop = asyncio.get_running_loop()
        spans = await loop.run_in_executor(self._lime, sentence_spans, text)
        names = list(self.batchers)
        results = await asyncio.gather(
            *(loop.run_in_executor(self._lime, self._lime_one, text, spans, name, loop) for name in names)
        )
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
        samples = self.settings.lime_samples
        explanations = {
            name: {"samples": samples, "intercept": finite(r.intercept), "score": finite(r.score)}
            for name, r in by_model.items()
        }
        return {"sentences": sentences, "explanations": explanations}

    def _lime_one(self, text: str, spans: list[Span], name: str, loop: asyncio.AbstractEventLoop):
        """LIME for one model, in a LIME thread; the model calls go through the batcher."""
        from model.explain import explain_sentences

        batcher = self.batchers[name]

        def predict(texts: list[str]) -> np.ndarray:
            return asyncio.run_coroutine_threadsafe(batcher(texts), loop).result(LIME_WAIT_S)

        return explain_sentences(text, spans, predict, self.settings.lime_samples, self.settings.seed)
