"""What BERT reads of a text: its token ids, long texts cut to their head and tail
(``head_and_tail``; with sentences pooling, whole sentences from both ends,
``head_and_tail_sentences``), framed in the checkpoint's special tokens and padded into batches
(``Encoder``)."""

from collections.abc import Sequence

import torch


def head_and_tail(ids: list[int], budget: int) -> list[int]:
    """Keep the first quarter and the last three quarters of ``budget`` tokens."""
    if len(ids) <= budget:
        return ids
    head = budget // 4
    return ids[:head] + ids[len(ids) - (budget - head) :]


def head_and_tail_sentences(lengths: Sequence[int], budget: int) -> list[int]:
    """Which sentences of these token ``lengths`` to read: all if they fit ``budget`` tokens, else
    the first ones within a quarter of it and the last ones within the rest, as ``head_and_tail``
    keeps tokens."""
    if sum(lengths) <= budget:
        return list(range(len(lengths)))
    head, used = [], 0
    for i, length in enumerate(lengths):
        if used + length > budget // 4:
            break
        head.append(i)
        used += length
    tail = []
    for i in range(len(lengths) - 1, len(head) - 1, -1):
        if used + lengths[i] > budget:
            break
        tail.append(i)
        used += lengths[i]
    return head + tail[::-1]


class Encoder:
    """Tokenizes texts into padded batches, truncating long ones to head and tail."""

    def __init__(self, tokenizer, max_length: int):
        self.tokenizer = tokenizer
        # The special tokens around a single text ([CLS] … [SEP] for BERT, <s> … </s> for RoBERTa).
        plain = tokenizer("a", add_special_tokens=False)["input_ids"]
        framed = tokenizer("a")["input_ids"]
        at = next(i for i in range(len(framed)) if framed[i : i + len(plain)] == plain)
        self.prefix, self.suffix = framed[:at], framed[at + len(plain) :]
        self.budget = max_length - len(self.prefix) - len(self.suffix)  # the pieces of a text read at most

    def ids(self, texts: list[str]) -> list[list[int]]:
        if not texts:  # the tokenizers fail on an empty batch (a sentence model's texts of no sentences)
            return []
        raw = self.tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
        return [self.framed(x) for x in raw]

    def ids_and_starts(self, text: str) -> tuple[list[int], list[int]]:
        """``ids([text])[0]``, and where in ``text`` each piece read between the special tokens starts,
        from the same tokenization. Apart from ``ids``: the offsets would lengthen the tokenizing of every
        batch, and only the word shares need them."""
        pieces = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        starts = [start for start, _ in head_and_tail(pieces["offset_mapping"], self.budget)]
        return self.framed(pieces["input_ids"]), starts

    def framed(self, pieces: list[int]) -> list[int]:
        """A text's token ids as read: cut to head and tail, between the special tokens."""
        return self.prefix + head_and_tail(pieces, self.budget) + self.suffix

    def pad(self, batch: list[list[int]], device: torch.device) -> dict[str, torch.Tensor]:
        padded = self.tokenizer.pad({"input_ids": batch}, return_tensors="pt")
        return {k: v.to(device) for k, v in padded.items()}
