"""Fine-tuning a BERT-family encoder for two-class sentiment, and batched inference.

Training follows the playbook of Howard & Ruder (ULMFiT) and Sun et al. (2019):
slanted triangular learning rates, optional discriminative (layer-wise) rates
and gradual unfreezing, and head-plus-tail truncation of long reviews.
Mixed precision: float16 on CUDA, bfloat16 on CPUs that support it.

The classifier, with the training loop and the inference that share its state, and the frozen
bottom layers that training computes once (``FrozenBottom``). Its parts: what it reads of a text
(``model.encoding``), the network by pooling (``model.pooling``), the optimiser, schedule and
targets (``model.fine_tuning``), the device and number formats (``model.devices``).
"""

__all__ = ["BertClassifier"]

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
from model.config import DISTILL, PER_SENTENCE, SENTENCE_WINDOWS, SENTENCES, BertConfig, CalibrationConfig
from model.devices import autocast, int8_linears
from model.encoding import Encoder, head_and_tail_sentences
from model.fine_tuning import gold_targets, layer_groups, optimizer_and_schedule, seed_everything
from model.names import BERT, DISPLAY_NAMES, LABELS, STUDENT_NETWORK, TEACHER
from model.sentences import Sentences, Span, split_sentences

# before transformers is imported, here and through model.pooling
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from transformers import AutoTokenizer  # noqa: E402

from model.pooling import sequence_classifier  # noqa: E402

TEMPERATURE = "temperature"  # the key of the fitted temperature in a model's facts file
OFFSET = "offset"  # and of the offset added to its log-odds (app.offline.steps.calibration.Calibrate)
OFFSET_PER = "offset_per"  # and of how often it is added (model.config.CalibrationConfig)
# and of the folder, beside its own, of the model that reads its texts of one sentence (model.config.ServingConfig)
ONE_SENTENCE_READER = "one_sentence_reader"


def one_sentence_reader_of(recipe: str, choice: str) -> str | None:
    """The folder of the model that a served BERT hands its texts of one sentence to: the distill
    recipe's teacher when ``choice`` (one_sentence_reader) is the teacher; else None, and the BERT
    reads every text itself."""
    return TEACHER if recipe == DISTILL and choice == TEACHER else None


def network_reading(sentences: Sequence, one_sentence_reader: bool) -> str:
    """Which network of a served BERT reads a text of these ``sentences`` (its split, made once by the
    caller): the ``one_sentence_reader`` (TEACHER) for a text of one sentence when it has one, its own
    (STUDENT_NETWORK) for any other. What the API reports (``read_by``) and what the server charges."""
    return TEACHER if one_sentence_reader and len(sentences) == 1 else STUDENT_NETWORK


class TooManyFrozenLayers(ValueError):
    """``frozen_layers`` leaves none of the checkpoint's encoder layers to train."""


class ReaderUnavailable(Exception):
    """The model that a model hands its texts of one sentence to (``directory``) cannot be loaded."""

    def __init__(self, directory: Path, error: Exception):
        super().__init__(str(error))
        self.directory = directory


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
    """A fine-tuned sequence classifier with batched, length-sorted inference."""

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
        temperature: float = 1.0,
        int8: bool = False,
        offset: float = 0.0,
        offset_per: str = PER_SENTENCE,
        one_sentence_reader: "BertClassifier | None" = None,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.config = config
        self.encoder = Encoder(tokenizer, config.max_length)
        # Padded tokens per forward pass: small on CPU, where small batches ran fastest
        # (scripts/bench_lime.py), large on CUDA.
        self.max_tokens = max_tokens or (65536 if device.type == "cuda" else 2048)
        # Scores are divided by it before the softmax (temperature scaling, Guo et al. 2017);
        # app.offline.steps.calibration.Calibrate fits it on held-out folds of the training reviews.
        self.temperature = temperature
        # Added to the log-odds of "positive": app.offline.steps.calibration.Calibrate fits it on unlabeled reviews, so
        # that the model reads them as positive as often as the training reviews are. It is added
        # once per sentence a sentence model reads (``offset_per``; ``raw_scores``'s units).
        self.offset = offset
        self.offset_per = offset_per
        # Whether the linear layers are int8 (``int8_linears``). Their activations are scaled over
        # a whole batch: batched, a text's score would depend on its batch neighbours (up to 0.13
        # in probability), so such a model scores texts singly, and in float32, the only input
        # type of the quantized layers (no bfloat16 autocast).
        self.int8 = int8
        # A sentence model: it reads a text's sentences, and takes a text given as ``Sentences``.
        self.reads_sentences = config.pooling == SENTENCES
        # Another model that ``predict_proba`` hands a text of one sentence to (the distill recipe's
        # teacher, which reads one-line reviews better than its student), or None.
        self.one_sentence_reader = one_sentence_reader

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
        """The classifier's scores (negative, positive), one row per text, untempered, with
        ``offset`` added to the positive one.

        What the model reads (each text, or each sentence) is sorted by length and packed into
        batches of at most ``max_tokens`` (default: the classifier's own) padded tokens, so short
        ones do not pay for long ones; a sentence that several texts share is read once.
        """
        scores, units = self.raw_scores(texts, max_tokens)
        scores[:, 1] += self.offset * units
        return scores

    @torch.inference_mode()
    def raw_scores(self, texts: list[str], max_tokens: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The scores of ``logits`` before the offset, and how many times the offset is added to
        each text: once per sentence a sentence model reads of it (none for an empty text), so
        the offset is a change of each sentence's bias and the sentence weights stay exact, and
        scaled as the sentences' scores are (``length_scale``); once per text for a whole-text
        model, or with ``offset_per`` "text"."""
        ids, members = self.read_units(texts)
        scores = self.text_logits(ids, members, 1 if self.int8 else max_tokens or self.max_tokens)
        if self.reads_sentences and self.offset_per == PER_SENTENCE:
            # each sentence's bias is scaled with its score (``length_scale``)
            counts = np.array([len(own) for own in members], dtype=float)
            units = counts * self.length_scale(counts)
        else:
            units = np.ones(len(texts))
        return scores.cpu().numpy(), units

    def read_units(self, texts: Sequence[str]) -> tuple[list[list[int]], list[list[int]]]:
        """The token ids of what the model reads of ``texts``, each distinct one once, and for each
        text the indices of its own: the text whole, or with ``sentences`` pooling its sentences (as
        split here, or as given by a ``Sentences``), at most ``SENTENCE_WINDOWS`` windows' worth
        (``head_and_tail_sentences``), so that a text costs at most that many times what a
        whole-text model pays for it."""
        if self.reads_sentences:
            units = [list(t) if isinstance(t, Sentences) else [s.text for s in split_sentences(t)] for t in texts]
        else:
            units = [[text] for text in texts]
        index = {unit: i for i, unit in enumerate(dict.fromkeys(u for own in units for u in own))}
        ids = self.encoder.ids(list(index))
        members = [[index[u] for u in own] for own in units]
        if self.reads_sentences:
            budget = self.sentence_budget
            members = [[own[i] for i in head_and_tail_sentences([len(ids[j]) for j in own], budget)] for own in members]
        return ids, members

    @property
    def sentence_budget(self) -> int:
        """The tokens of a text's sentences a sentence model reads at most (``read_units``)."""
        return SENTENCE_WINDOWS * self.config.max_length

    def sentences_read(self, sentences: Sequence[Span]) -> list[int] | None:
        """Which of a text's ``sentences`` (``split_sentences``'s, by index) this model adds up the
        scores of when it reads the text: all of them, or those ``read_units`` keeps of a long text.
        None when it does not read the text as a sum of its sentences: a whole-text model, or a text
        of one sentence that it hands to its ``one_sentence_reader``."""
        if not self.reads_sentences or self.read_by(sentences) == TEACHER:
            return None
        ids = self.encoder.ids([s.text for s in sentences])
        return head_and_tail_sentences([len(unit) for unit in ids], self.sentence_budget)

    def text_logits(
        self, ids: list[list[int]], members: list[list[int]], max_tokens: int | None, states: list | None = None
    ) -> torch.Tensor:
        """Scores (negative, positive) of the texts made of ``members`` of ``ids``. A whole text's
        are the model's; a text read in sentences has the log-odds of "positive" its sentences'
        scores add up to (an empty one: 0, even odds), times ``length_scale``. With ``states``
        (``FrozenBottom``), the model reads each unit's frozen states instead of its ids."""
        wanted = list(dict.fromkeys(i for own in members for i in own))
        local = {unit: i for i, unit in enumerate(wanted)}
        scores = torch.empty((len(wanted), 1 if self.reads_sentences else len(LABELS)), device=self.device)
        for batch in self._batches([ids[i] for i in wanted], max_tokens):
            if states is None:
                inputs = self.encoder.pad([ids[wanted[i]] for i in batch], self.device)
            else:
                inputs = pad_states([states[wanted[i]] for i in batch])
            with nullcontext() if self.int8 else autocast(self.device):
                scores[batch] = self.model(**inputs).logits.float()
        if not self.reads_sentences:
            return scores[[local[own[0]] for own in members]]
        owner = torch.tensor([t for t, own in enumerate(members) for _ in own], dtype=torch.long, device=self.device)
        rows = torch.tensor([local[i] for own in members for i in own], dtype=torch.long, device=self.device)
        log_odds = torch.zeros(len(members), device=self.device).index_add(0, owner, scores[rows, 0])
        if self.config.length_exponent:
            counts = torch.tensor([len(own) for own in members], dtype=torch.float32, device=self.device)
            log_odds = log_odds * self.length_scale(counts)
        return torch.stack([torch.zeros_like(log_odds), log_odds], dim=1)

    def length_scale(self, counts):
        """What the summed scores of texts of ``counts`` sentences are multiplied by: n ** ``length_exponent``
        (an empty text's, whose sum is 0: 1). Works on arrays and tensors alike."""
        return counts.clip(1) ** self.config.length_exponent

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

    def predict_proba(self, texts: list[str], max_tokens: int | None = None) -> np.ndarray:
        """Class probabilities (negative, positive), one row per text, calibrated (offset and temperature).

        With a ``one_sentence_reader``, a text of one sentence given as a string is that model's to
        read; every other text is this model's: a longer one, an empty one, and one given as
        ``Sentences`` (what an explanation scores of a text, ``model.explain.Perturbations``), so
        that a text's explanation asks the network that read it."""
        reader = self.one_sentence_reader
        if reader is None:
            return self.own_proba(texts, max_tokens)
        split = [t if isinstance(t, Sentences) else Sentences(s.text for s in split_sentences(t)) for t in texts]
        alone = np.array([not isinstance(t, Sentences) and self.read_by(s) == TEACHER for t, s in zip(texts, split)], dtype=bool)
        own = split if self.reads_sentences else texts  # a sentence model is handed the sentences split here
        p = np.empty((len(texts), len(LABELS)), dtype=np.float32)
        if alone.any():
            p[alone] = reader.predict_proba([t for t, one in zip(texts, alone) if one], max_tokens)
        if not alone.all():
            p[~alone] = self.own_proba([t for t, one in zip(own, alone) if not one], max_tokens)
        return p

    def own_proba(self, texts: list[str], max_tokens: int | None = None) -> np.ndarray:
        """``predict_proba`` of this model's own network, whatever the length of the texts."""
        scores = torch.from_numpy(self.logits(texts, max_tokens)) / self.temperature
        return torch.softmax(scores, dim=-1).numpy()

    def read_by(self, sentences: Sequence) -> str:
        """Which network ``predict_proba`` has read a text of these ``sentences`` (its split, made once
        by the caller) with: the ``one_sentence_reader`` (TEACHER) or this model's own (``network_reading``)."""
        return network_reading(sentences, self.one_sentence_reader is not None)

    def reads_alone(self, text: str) -> bool:
        """Whether ``predict_proba`` hands ``text`` to the ``one_sentence_reader``."""
        return self.read_by(split_sentences(text)) == TEACHER

    def save(self, directory: Path, meta: dict | None = None) -> None:
        """Write model, tokenizer and config (plus ``meta`` facts) to ``directory`` atomically."""
        with atomic_directory(directory, {**self.config.model_dump(), **(meta or {})}) as partial:
            self.model.save_pretrained(partial)
            self.tokenizer.save_pretrained(partial)

    @classmethod
    def load(
        cls, directory: Path, device: torch.device, max_tokens: int | None = None, cpu_int8: bool = False
    ) -> "BertClassifier":
        """The model saved in ``directory``; with ``cpu_int8`` on a CPU, its linear layers in int8
        (``int8_linears``), one text per forward pass."""
        meta = read_meta(directory, DISPLAY_NAMES[cls.key])
        config = BertConfig.model_validate({**BertConfig.predating_values(), **meta})
        tokenizer = AutoTokenizer.from_pretrained(directory)
        model = sequence_classifier(directory, config.pooling).to(device)
        int8 = cpu_int8 and device.type == "cpu"
        if int8:
            model = int8_linears(model)
        temperature, offset = meta.get(TEMPERATURE, 1.0), meta.get(OFFSET, 0.0)
        offset_per = meta.get(OFFSET_PER, CalibrationConfig.predating_values()[OFFSET_PER])
        reader = None
        if folder := meta.get(ONE_SENTENCE_READER):
            try:
                reader = cls.load(directory.parent / folder, device, max_tokens, cpu_int8)
            except Exception as error:
                raise ReaderUnavailable(directory.parent / folder, error) from error
        return cls(model, tokenizer, device, config, max_tokens, temperature, int8, offset, offset_per, reader)
