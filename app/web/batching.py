"""How the server shares out its model calls: a micro-batcher per model, and the admission of work.

Each model sits behind a ``MicroBatcher``: requests put their texts on a priority queue;
one collector task takes the first, waits ``batch_window_ms`` for others (only while
requests overlap), and runs them all as one model call per kind of text (texts a reader is given, and
texts already cut into the sentences the model should read) in the model's own worker
thread, so the event loop never waits on a model and torch is never called from two
threads at once. Model calls are kept short, a request's own texts go before LIME's
perturbed texts, and small calls before large ones, so a short prediction never waits
long behind others.

Work is bounded: every analysis reserves its model passes (``app.web.costs.request_cost``) from
``WorkLimiter``, and beyond its pool a request is refused at once with ``ServerBusy`` (429 and a
Retry-After) instead of queueing without end. Small requests have a pool of their own
(``small_work_in_flight``), large ones ``max_work_in_flight``: the largest request cannot shut a short
one out, and a stream of short ones cannot keep a large one out.
"""

import asyncio
import collections
import heapq
import itertools
import logging
import math
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

import numpy as np

from app.web.costs import FULL_TEXT_CHARS
from app.web.errors import ServerBusy, ServerStopping
from model.config import SENTENCE_WINDOWS
from model.explain import ProbaFn, SentencesProbaFn

log = logging.getLogger("textflix")
# What a caller hands over, by the method it calls: texts (``predict_proba``), or texts given as their
# sentences (``proba_of_sentences``: LIME's, and the what-if's single sentences, for a sentence model).
TEXTS, SENTENCES_GIVEN = "texts", "sentences given"
URGENT, BACKGROUND = 0, 1  # a request's own texts; LIME's perturbed texts
# Full-length texts per model call by default: one forward pass on CPU (2048 tokens), a large batch on CUDA.
CALL_WEIGHT = {"cpu": 8, "cuda": 256}
# What a text longer than BERT's window counts for at most: a request's text, the windows a sentence
# model reads of a text; LIME's, one, for they are made of one text's sentences, and a model call
# reads a sentence that several of its texts share once.
LONGEST_WEIGHT = {URGENT: SENTENCE_WINDOWS, BACKGROUND: 1.0}


def text_weight(text: str | tuple[str, ...], kind: str, most: float) -> float:
    """How much of a model call a text of this ``kind`` takes: 1 when it fills BERT's window, less when shorter,
    and up to ``most`` when longer. A text given as its sentences counts their characters."""
    chars = sum(map(len, text)) if kind == SENTENCES_GIVEN else len(text)
    return max(0.01, min(most, chars / FULL_TEXT_CHARS))


class WorkLimiter:
    """Admits analyses while their model passes in flight stay within their pool: a request charged at most
    ``small_request`` passes (a quarter of ``small_capacity``: several always fit, and 64 texts of 20,000
    characters, half of it, are not small) draws on the small pool, any other on the large one, ``capacity``, of which
    one request may take ``largest_request``."""

    SMALL_SHARE = 4  # a small request is charged at most 1/SMALL_SHARE of the small pool
    WINDOW_S = 30.0  # throughput, for Retry-After, is measured over this many seconds

    def __init__(self, capacity: int, small_capacity: int = 0, largest_request: int | None = None):
        self.capacity = capacity
        self.small_capacity = small_capacity
        self.small_request = small_capacity // self.SMALL_SHARE
        self.largest_request = min(capacity, largest_request or capacity)
        self._pools = {True: 0, False: 0}  # passes in flight, by whether the requests are small
        self._done: collections.deque[tuple[float, int]] = collections.deque()

    @property
    def in_flight(self) -> int:
        return sum(self._pools.values())

    @asynccontextmanager
    async def admit(self, cost: int):
        """Reserves ``cost`` model passes for the block, which gets a function that raises the
        reservation to a new total once it knows more (``ServerBusy`` if that does not fit its pool)."""
        held, small = 0, True

        def reserve(total: int) -> None:
            nonlocal held, small
            to_small = total <= self.small_request
            others = self._pools[to_small] - (held if small == to_small else 0)
            if others + total > (self.small_capacity if to_small else self.capacity):
                raise ServerBusy(self._busy_message(others, total, to_small), self.retry_after(others))
            self._pools[small] -= held
            self._pools[to_small] += total
            held, small = total, to_small

        reserve(cost)
        try:
            yield reserve
            self._done.append((time.monotonic(), held))
        finally:
            self._pools[small] -= held

    def _busy_message(self, others: int, total: int, small: bool) -> str:
        pool = (
            f"the limit for small requests is {self.small_capacity:,} (TEXTFLIX_SMALL_WORK_IN_FLIGHT)" if small
            else f"the limit for requests over {self.small_request:,} passes is {self.capacity:,} (TEXTFLIX_MAX_WORK_IN_FLIGHT)"
        )  # fmt: skip
        return f"The server is busy with {others:,} model passes of other analyses; this one needs {total:,} and {pool}. Retry shortly."

    def retry_after(self, others: int) -> int:
        """Seconds until the ``others`` model passes in flight are likely done, at the throughput of the last half
        minute (an analysis frees its passes only when it ends: a minute-long one holds them all for its minute);
        the half minute itself when none ended in it."""
        now = time.monotonic()
        while self._done and self._done[0][0] < now - self.WINDOW_S:
            self._done.popleft()
        rate = sum(units for _, units in self._done) / self.WINDOW_S
        return int(self.WINDOW_S) if rate == 0 else max(1, min(120, math.ceil(others / rate)))


class MicroBatcher:
    """Gathers concurrent calls of one model into batched calls in one worker thread.

    ``await batcher(texts, priority)`` returns the model's class probabilities, one row
    per text; ``await batcher.sentences(texts, priority)`` those of texts given as their sentences,
    from the model's ``proba_of_sentences`` (a sentence model's). Waiting pieces of both kinds share a
    batch, which makes one model call per kind. A call is cut into pieces of at most ``call_weight`` full-length texts
    (``text_weight``: shorter texts count for less, longer ones up to ``LONGEST_WEIGHT``),
    and a model call takes at most that much too, so that it stays short: it cannot be
    interrupted, and a newly arrived call waits for at most the one that is running. Waiting
    pieces go most urgent first (a request's own texts before LIME's), then smallest first,
    then oldest. A batch of URGENT pieces waits up to ``window_s`` seconds (0: batching off,
    one piece per model call) for company, only while calls overlap (the last batch had
    several, or more are queued), so a lone request at low load pays no delay, and no longer
    than it takes to fill a model call. Texts are deduplicated within a batch; cancelled calls are dropped.
    """

    def __init__(
        self, name: str, predict: ProbaFn, window_s: float, max_texts: int, call_weight: float = 8,
        proba_of_sentences: SentencesProbaFn | None = None,
    ):
        self.name = name
        self.predict = {TEXTS: predict, SENTENCES_GIVEN: proba_of_sentences}
        self.window_s = window_s
        self.max_texts = max_texts
        self.call_weight = call_weight
        self.calls = 0  # model calls made, and texts sent to the model (after dedup)
        self.texts = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        # A heap of (priority, weight, arrival, kind, texts, future): most urgent, then lightest, then oldest.
        self._waiting: list[tuple[int, float, int, str, list, asyncio.Future]] = []
        self._arrived: asyncio.Event | None = None
        self._arrival = itertools.count()
        self._task: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._in_flight: list[tuple[str, list, asyncio.Future]] = []
        self._contended = False  # did the last batch have company (several calls, or more waiting)?

    @property
    def reads_sentences(self) -> bool:
        """Whether its model reads texts given as their sentences (``sentences``)."""
        return self.predict[SENTENCES_GIVEN] is not None

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
        return await self._scored(TEXTS, list(texts), priority)

    async def sentences(self, texts: Sequence[Sequence[str]], priority: int = URGENT) -> np.ndarray:
        """The model's ``proba_of_sentences`` of ``texts`` given as their sentences, batched as ``__call__``'s."""
        if not self.reads_sentences:
            raise TypeError(f"{self.name} reads texts, not sentences: it has no proba_of_sentences")
        return await self._scored(SENTENCES_GIVEN, [tuple(t) for t in texts], priority)

    async def _scored(self, kind: str, texts: list, priority: int) -> np.ndarray:
        if not texts:
            return np.empty((0, 2), dtype=np.float32)
        self._ensure_started()
        futures = []
        for piece, weight in self._pieces(texts, kind, LONGEST_WEIGHT[priority]):
            futures.append(self._loop.create_future())
            heapq.heappush(self._waiting, (priority, weight, next(self._arrival), kind, piece, futures[-1]))
        self._arrived.set()
        return np.concatenate(await asyncio.gather(*futures))

    def _pieces(self, texts: list, kind: str, longest: float) -> list[tuple[list, float]]:
        """``texts`` cut into pieces of at most ``call_weight``, with their weights (a text's at most ``longest``)."""
        pieces: list[tuple[list, float]] = [([], 0.0)]
        for text in texts:
            weight = text_weight(text, kind, longest)
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
        urgent = [(weight, len(texts)) for priority, weight, _, _, texts, _ in self._waiting if priority == URGENT]
        return sum(w for w, _ in urgent) >= self.call_weight or sum(n for _, n in urgent) >= self.max_texts

    def _take_batch(self) -> list[tuple[str, list, asyncio.Future]]:
        """The pieces at the head of the queue that fit in one model call, cancelled ones dropped."""
        priority = self._waiting[0][0]
        batch, weight, count = [], 0.0, 0
        while self._waiting and self._waiting[0][0] == priority:
            _, piece_weight, _, kind, texts, future = self._waiting[0]
            full = weight + piece_weight > self.call_weight or count + len(texts) > self.max_texts
            if batch and (full or self.window_s == 0):  # window 0: batching off
                break
            heapq.heappop(self._waiting)
            if not future.done():
                batch.append((kind, texts, future))
                weight, count = weight + piece_weight, count + len(texts)
        return batch

    async def _run(self, live: list[tuple[str, list, asyncio.Future]], loop: asyncio.AbstractEventLoop) -> None:
        """One model call per kind of text for the callers in ``live``."""
        for kind in dict.fromkeys(kind for kind, _, _ in live):
            await self._call(kind, [(texts, future) for of, texts, future in live if of == kind], loop)

    async def _call(self, kind: str, live: list[tuple[list, asyncio.Future]], loop: asyncio.AbstractEventLoop) -> None:
        """One model call of ``kind`` for every caller in ``live``; each caller gets its rows or the error."""
        unique: dict[str | tuple[str, ...], int] = {}
        rows = [[unique.setdefault(text, len(unique)) for text in texts] for texts, _ in live]
        try:
            probs = await loop.run_in_executor(self._executor, self.predict[kind], list(unique))
            if len(probs) != len(unique):
                raise RuntimeError(f"{self.name} returned {len(probs)} rows for {len(unique)} texts")
        except Exception as error:
            if len(live) > 1:  # find the culprit: the others should not fail with it
                for item in live:
                    await self._call(kind, [item], loop)
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
        pending += [(kind, texts, future) for *_, kind, texts, future in self._waiting]
        self._waiting.clear()
        for *_, future in pending:
            if not future.done():
                future.set_exception(ServerStopping())
        self._task = None
        self._in_flight = []
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
