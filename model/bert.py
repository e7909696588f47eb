"""Fine-tuning a BERT-family encoder for two-class sentiment, and batched inference.

Training follows the playbook of Howard & Ruder (ULMFiT) and Sun et al. (2019):
slanted triangular learning rates, optional discriminative (layer-wise) rates
and gradual unfreezing, and head-plus-tail truncation of long reviews.
Mixed precision: float16 on CUDA, bfloat16 on CPUs that support it.

The classifier, with the training loop and the inference that share its state, and the frozen
bottom layers that training computes once (``FrozenBottom``). Its parts: what it reads of a text
(``model.encoding``) and how (whole or as its sentences summed, ``model.reading``), the network by
pooling (``model.pooling``), its calibration (``model.calibration``), the optimiser, schedule and
targets (``model.fine_tuning``), the device and number formats (``model.devices``,
``model.number_format``). The model as served, with its one-sentence reader: ``model.served``.
"""

# what callers imported from here before calibration and the one-sentence rule had modules of their own
__all__ = ["OFFSET", "OFFSET_PER", "ONE_SENTENCE_READER", "TEMPERATURE", "BertClassifier", "network_reading",
           "one_sentence_reader_of"]

import math
import os
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from tqdm import tqdm

from model import checkpoints
from model.artifacts import atomic_directory, read_meta
from model.calibration import OFFSET, OFFSET_PER, TEMPERATURE, Calibration
from model.config import BertConfig
from model.devices import autocast
from model.encoding import Encoder
from model.fine_tuning import gold_targets, layer_groups, optimizer_and_schedule, seed_everything
from model.names import BERT, DISPLAY_NAMES
from model.number_format import MixedPrecision, inference_format
from model.one_sentence import ONE_SENTENCE_READER, network_reading, one_sentence_reader_of
from model.reading import reading_of
from model.sentences import Span

# before transformers is imported, here and through model.pooling
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from transformers import AutoTokenizer  # noqa: E402

from model.pooling import sequence_classifier  # noqa: E402


class TooManyFrozenLayers(ValueError):
    """``frozen_layers`` leaves none of the checkpoint's encoder layers to train."""


class PassThrough(torch.nn.Module):
    """Stands in for a model's embeddings: what it is given as ``inputs_embeds`` goes on as is."""

    def forward(self, inputs_embeds=None, **_):
        return inputs_embeds


class FrozenBottom:
    """The embeddings and lowest ``layers`` encoder layers of a model in training, frozen. What
    they make of each unit is computed once (``states``); training then runs only the layers
    above (``top_only``), at about (L − ``layers``) / L of the full model's cost. The frozen part
    reads without dropout, as it is run once."""

    def __init__(self, model, layers: int):
        self.base = getattr(model, model.base_model_prefix)
        self.all_layers = self.base.encoder.layer
        if not 0 < layers < len(self.all_layers):
            raise TooManyFrozenLayers(f"it must be under the model's {len(self.all_layers)} layers, not {layers}")
        self.layers = layers
        for parameter in [*self.base.embeddings.parameters(), *self.all_layers[:layers].parameters()]:
            parameter.requires_grad = False

    @torch.no_grad()
    def states(self, classifier: "BertClassifier", ids: list[list[int]], progress: bool = False) -> list[torch.Tensor]:
        """Each unit's hidden states after the frozen layers, its own length (no padding)."""
        if classifier.tokenizer.padding_side != "right":
            raise ValueError("frozen layers need a tokenizer that pads on the right.")
        states = [torch.empty(0)] * len(ids)
        was_training = self.base.training
        self.base.eval()
        self.base.encoder.layer = self.all_layers[: self.layers]
        try:
            batches = list(classifier._batches(ids, classifier.max_tokens))
            for batch in tqdm(batches, desc="Frozen layers", unit="batch", disable=not progress, leave=False):
                inputs = classifier.encoder.pad([ids[i] for i in batch], classifier.device)
                with autocast(classifier.device):
                    hidden = self.base(**inputs).last_hidden_state.float()
                for row, i in enumerate(batch):
                    states[i] = hidden[row, : len(ids[i])].clone()
        finally:
            self.base.encoder.layer = self.all_layers
            self.base.train(was_training)
        return states

    @contextmanager
    def top_only(self) -> Iterator[None]:
        """The model runs from its first unfrozen layer, on ``states`` given as ``inputs_embeds``."""
        embeddings = self.base.embeddings
        self.base.embeddings = PassThrough()
        self.base.encoder.layer = self.all_layers[self.layers :]
        try:
            yield
        finally:
            self.base.embeddings = embeddings
            self.base.encoder.layer = self.all_layers


class StepCounter:
    """Counts a training's optimizer steps on its progress bar and to its ``report(done, total)``."""

    def __init__(self, bar: tqdm, total: int, report: Callable[[int, int], None] | None):
        self.bar, self.total, self.report, self.done = bar, total, report, 0
        if report is not None:
            report(0, total)

    def update(self, epoch: int, loss: float) -> None:
        self.done += 1
        self.bar.update(1)
        self.bar.set_postfix(epoch=epoch, loss=f"{loss:.3f}")
        if self.report is not None:
            self.report(self.done, self.total)


def pad_states(states: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """Hidden states of several units as one batch, padded on the right, with their attention mask."""
    lengths = torch.tensor([len(x) for x in states])
    mask = (torch.arange(int(lengths.max()))[None, :] < lengths[:, None]).long()
    return {"inputs_embeds": torch.nn.utils.rnn.pad_sequence(states, batch_first=True), "attention_mask": mask.to(states[0].device)}


def shuffle_units(keys: Iterable[Hashable]) -> list[list[int]]:
    """The indices of ``keys`` grouped by key, in order of first appearance: what training shuffles."""
    units: dict[Hashable, list[int]] = {}
    for index, key in enumerate(keys):
        units.setdefault(key, []).append(index)
    return list(units.values())


def epoch_order(units: list[list[int]], generator: torch.Generator) -> list[int]:
    """The text indices of ``units`` in the order of one epoch: the units shuffled, each kept whole."""
    return [text for unit in torch.randperm(len(units), generator=generator).tolist() for text in units[unit]]


class BertClassifier:
    """A fine-tuned sequence classifier with batched, length-sorted inference. Its parts: how it reads
    a text (``reading``: whole, or its sentences summed, ``model.reading``), its ``calibration``
    (``model.calibration``) and the ``number_format`` it reads in (int8 or not, ``model.number_format``).
    A served one may hand its texts of one sentence to another model: ``model.served.load_served``."""

    key: ClassVar[str] = BERT
    config_type: ClassVar[type[BertConfig]] = BertConfig
    fast_to_train: ClassVar[bool] = False  # see model.trained.Classifier
    training_unit: ClassVar[str] = "optimizer steps"

    def __init__(
        self,
        model,
        tokenizer,
        device: torch.device,
        config: BertConfig,
        max_tokens: int | None = None,
        calibration: Calibration | None = None,
        number_format=None,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.config = config
        self.encoder = Encoder(tokenizer, config.max_length)
        # Padded tokens per forward pass: small on CPU, where small batches ran fastest
        # (scripts/bench_lime.py), large on CUDA.
        self.max_tokens = max_tokens or (65536 if device.type == "cuda" else 2048)
        self.calibration = calibration or Calibration()
        self.number_format = number_format or MixedPrecision(device)
        self.reading = reading_of(config)  # the text whole, or its sentences summed
        # A sentence model also reads a text given as its sentences (``proba_of_sentences``).
        self.reads_sentences = self.reading.reads_sentences

    @classmethod
    def pretrained(cls, config: BertConfig, device: torch.device) -> "BertClassifier":
        """``config.base_model`` with a new, seeded two-class head: the starting point of training."""
        seed_everything(config.seed)
        location = checkpoints.packaged_location(config.base_model)
        try:
            tokenizer = AutoTokenizer.from_pretrained(location)
            model = sequence_classifier(location, config.pooling)
        except OSError as error:
            reason = str(error).strip().splitlines()[0]
            raise checkpoints.CheckpointError(
                f"The checkpoint {config.base_model} cannot be loaded ({reason})"
                f"{checkpoints.install_hint(config.base_model)}."
            ) from error
        return cls(model.to(device), tokenizer, device, config)

    @classmethod
    def train(
        cls,
        texts: list[str],
        labels: list[str],
        config: BertConfig,
        device: torch.device,
        progress: bool = True,
        desc: str = "Fine-tune BERT",
        report: Callable[[int, int], None] | None = None,
    ) -> "BertClassifier":
        """Fine-tune ``config.base_model`` on labelled texts; returns the trained classifier."""
        return cls.fit(texts, gold_targets(labels), config, device, progress, desc, report=report)

    @classmethod
    def fit(
        cls,
        texts: list[str],
        p_positive: Sequence[float],
        config: BertConfig,
        device: torch.device,
        progress: bool = True,
        desc: str = "Fine-tune BERT",
        together: Sequence[Hashable] | None = None,
        report: Callable[[int, int], None] | None = None,
    ) -> "BertClassifier":
        """Fine-tune ``config.base_model`` towards target probabilities of "positive": 1 or 0
        for gold labels, a teacher's probability for the texts it labelled.

        ``together``, a key per text: texts of the same key (a review and the runs of sentences cut
        from it) are shuffled as one and so mostly share their batches, where a sentence model reads
        each of their common sentences once. Without it, every text is shuffled alone. ``report(done, total)``
        hears how many optimizer steps are done: 0 once the frozen layers' pass is, then after each."""
        classifier = cls.pretrained(config, device)
        model = classifier.model
        ids, members = classifier.read_units(texts)
        shuffled = shuffle_units(together if together is not None else range(len(texts)))
        p = torch.tensor(p_positive, dtype=torch.float32)
        targets = torch.stack([1 - p, p], dim=1)  # columns in LABELS order

        frozen = FrozenBottom(model, config.frozen_layers) if config.frozen_layers else None
        states = frozen.states(classifier, ids, progress) if frozen else None

        groups = layer_groups(model)[frozen.layers + 1 :] if frozen else layer_groups(model)
        total = math.ceil(len(members) / config.batch_size) * config.epochs
        optimizer, scheduler = optimizer_and_schedule(groups, config, total)
        model.train()
        bar = tqdm(total=total, desc=desc, unit="step", disable=not progress)
        counted = StepCounter(bar, total, report)
        with frozen.top_only() if frozen else nullcontext():
            classifier._train_epochs(ids, members, shuffled, states, targets, groups, optimizer, scheduler, counted)
        bar.close()
        model.eval()
        return classifier

    def _train_epochs(self, ids, members, shuffled, states, targets, groups, optimizer, scheduler, bar) -> None:
        """``config.epochs`` passes over the texts made of ``members`` of ``ids`` (or of their frozen
        ``states``), in batches of ``config.batch_size`` texts taken in a random order of the
        ``shuffled`` units (lists of text indices)."""
        config, model, device = self.config, self.model, self.device
        scaler = torch.amp.GradScaler(enabled=device.type == "cuda")
        generator = torch.Generator().manual_seed(config.seed)
        # A whole-text model reads its batch in one pass; a sentence model its sentences in packed passes.
        budget = self.max_tokens if self.reads_sentences else None
        for epoch in range(config.epochs):
            if config.gradual_unfreezing:
                trainable = min(epoch + 1, len(groups))  # the top groups, one more each epoch
                for i, group in enumerate(groups):
                    for p in group:
                        p.requires_grad = i >= len(groups) - trainable
            order = epoch_order(shuffled, generator)
            for start in range(0, len(order), config.batch_size):
                batch = order[start : start + config.batch_size]
                logits = self.text_logits(ids, [members[i] for i in batch], budget, states)
                loss = torch.nn.functional.cross_entropy(logits, targets[batch].to(device))
                optimizer.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                bar.update(epoch + 1, loss.item())

    @torch.inference_mode()
    def logits(self, texts: list[str], max_tokens: int | None = None) -> np.ndarray:
        """The classifier's scores (negative, positive), one row per text, untempered, with the
        calibration's offset added to the positive one.

        What the model reads (each text, or each sentence) is sorted by length and packed into
        batches of at most ``max_tokens`` (default: the classifier's own) padded tokens, so short
        ones do not pay for long ones; a sentence that several texts share is read once.
        """
        return self.calibration.logits(*self.raw_scores(texts, max_tokens))

    @torch.inference_mode()
    def raw_scores(self, texts: list[str], max_tokens: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The scores of ``logits`` before the offset, and how many times the offset is added to
        each text (``Calibration.offset_units``, of the reading's ``offset_units``)."""
        return self.scores_of(*self.read_units(texts), max_tokens)

    @torch.inference_mode()
    def scores_of(self, ids: list[list[int]], members: list[list[int]], max_tokens: int | None) -> tuple[np.ndarray, np.ndarray]:
        """``raw_scores`` of the texts made of ``members`` of ``ids`` (``read_units``)."""
        budget = self.number_format.tokens_per_pass(max_tokens or self.max_tokens)
        scores = self.text_logits(ids, members, budget)
        return scores.cpu().numpy(), self.calibration.offset_units(self.reading.offset_units(members))

    def predict_proba(self, texts: list[str], max_tokens: int | None = None) -> np.ndarray:
        """Class probabilities (negative, positive), one row per text, calibrated (offset and temperature)."""
        return self.calibration.proba(*self.raw_scores(texts, max_tokens))

    def proba_of_sentences(self, texts: Sequence[Sequence[str]], max_tokens: int | None = None) -> np.ndarray:
        """``predict_proba`` of texts given as their sentences, read as given (not split again): a
        sentence model's, for what an explanation scores of a text (``model.explain.Perturbations``)."""
        if not self.reads_sentences:
            raise TypeError("a whole-text model reads texts, not sentences")
        return self.calibration.proba(*self.scores_of(*self.units_read([list(t) for t in texts]), max_tokens))

    def read_units(self, texts: Sequence[str]) -> tuple[list[list[int]], list[list[int]]]:
        """The token ids of what the model reads of ``texts``, each distinct one once, and for each
        text the indices of its own (``units_read`` of the reading's ``units``)."""
        return self.units_read([self.reading.units(text) for text in texts])

    def units_read(self, units: list[list[str]]) -> tuple[list[list[int]], list[list[int]]]:
        """The token ids of each distinct one of the texts' ``units``, and for each text the indices of
        those the reading keeps (``kept``: of a long text, only some of its sentences)."""
        index = {unit: i for i, unit in enumerate(dict.fromkeys(u for own in units for u in own))}
        ids = self.encoder.ids(list(index))
        return ids, self.reading.kept(ids, [[index[u] for u in own] for own in units])

    def sentences_read(self, sentences: Sequence[Span]) -> list[int] | None:
        """Which of a text's ``sentences`` (``split_sentences``'s, by index) this model adds up the
        scores of when it reads the text: all of them, or those it keeps of a long text. None when it
        does not read the text as a sum of its sentences (a whole-text model)."""
        return self.reading.sentences_read(sentences, self.encoder)

    def length_scale(self, counts):
        """A sentence model's factor of the summed scores of texts of ``counts`` sentences (``SentencesSummed``)."""
        return self.reading.length_scale(counts)

    def text_logits(
        self, ids: list[list[int]], members: list[list[int]], max_tokens: int | None, states: list | None = None
    ) -> torch.Tensor:
        """Scores (negative, positive) of the texts made of ``members`` of ``ids``, pooled by the
        reading from its units' (``pooled``). With ``states`` (``FrozenBottom``), the model reads each
        unit's frozen states instead of its ids."""
        wanted = list(dict.fromkeys(i for own in members for i in own))
        local = {unit: i for i, unit in enumerate(wanted)}
        scores = torch.empty((len(wanted), self.reading.outputs), device=self.device)
        for batch in self._batches([ids[i] for i in wanted], max_tokens):
            if states is None:
                inputs = self.encoder.pad([ids[wanted[i]] for i in batch], self.device)
            else:
                inputs = pad_states([states[wanted[i]] for i in batch])
            with self.number_format.context():
                scores[batch] = self.model(**inputs).logits.float()
        return self.reading.pooled(scores, [[local[i] for i in own] for own in members])

    @staticmethod
    def _batches(ids: list[list[int]], max_tokens: int | None) -> Iterator[list[int]]:
        """Indices of ``ids`` in batches: sorted by length, at most ``max_tokens`` padded tokens
        each; with ``max_tokens`` None, one batch in the order given."""
        if max_tokens is None:
            yield list(range(len(ids)))
            return
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        start = 0
        while start < len(order):
            end = start + 1
            while end < len(order) and len(ids[order[end]]) * (end - start + 1) <= max_tokens:
                end += 1
            yield order[start:end]
            start = end

    def save(self, directory: Path, meta: dict | None = None) -> None:
        """Write model, tokenizer and config (plus ``meta`` facts) to ``directory`` atomically."""
        with atomic_directory(directory, {**self.config.model_dump(), **(meta or {})}) as partial:
            self.model.save_pretrained(partial)
            self.tokenizer.save_pretrained(partial)

    @classmethod
    def load(
        cls, directory: Path, device: torch.device, max_tokens: int | None = None, cpu_int8: bool = False
    ) -> "BertClassifier":
        """The model saved in ``directory``, with its calibration; with ``cpu_int8`` on a CPU, its
        linear layers in int8 (``model.number_format.Int8Linears``). It reads every text itself: the
        model as served, with its one-sentence reader, is ``model.served.load_served``'s."""
        meta = read_meta(directory, DISPLAY_NAMES[cls.key])
        config = BertConfig.model_validate({**BertConfig.predating_values(), **meta})
        tokenizer = AutoTokenizer.from_pretrained(directory)
        model, number_format = inference_format(sequence_classifier(directory, config.pooling).to(device), device, cpu_int8)
        return cls(model, tokenizer, device, config, max_tokens, Calibration.of_facts(meta), number_format)
