"""BERT's word shares for the server (``model.word_shares``), computed beside the served models.

Captum hooks the embedding layer of the network it differentiates while it works, so the network the
micro-batchers serve (``app.web.batching``) must not be that one: ``WordSharer`` loads its own copy of the
served BERT (``model.served.load_served``; never int8, whose linear layers have no gradients, even with
``cpu_int8``) on its first use, and computes in its one thread, one text at a time. Its work is priced
(``app.web.costs.words_cost``) and reserved by the caller from the analyzer's ``WorkLimiter``. A computation
under way is not interrupted when its request is cancelled; one still queued is dropped.
"""

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from app.web.analysis_types import WordShare
from model.sentences import Span

if TYPE_CHECKING:  # Captum takes a second to import: on the first computation, not at start-up
    from model.word_shares import SentenceWords


class WordSharer:
    """Word shares of texts by a copy of the served BERT that ``load`` makes, loaded on first use."""

    def __init__(self, load: Callable[[], object]):
        self._load = load
        self._served = None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="textflix-words")

    def _shares(self, text: str, spans: list[Span]) -> "list[SentenceWords] | None":
        from model.word_shares import word_shares

        if self._served is None:  # in the one thread: loaded once
            self._served = self._load()
        return word_shares(self._served, text, spans)

    async def shares(self, text: str, spans: list[Span]) -> "list[SentenceWords] | None":
        """Each sentence's words of ``text`` (cut into ``spans``) with their shares (``model.word_shares``), in
        the sharer's thread; None where BERT does not read the text as a sum of its sentences."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._shares, text, spans)

    def stop(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)


def served_words(shares: "SentenceWords") -> list[WordShare]:
    """One sentence's words as the API answers them."""
    return [WordShare(text=word.text, start=word.start, end=word.end, share=word.share) for word in shares.words]
