"""The network a ``BertClassifier`` runs, by its pooling (``model.config.BertConfig.pooling``): the
checkpoint's own classification head (``cls``), or its token states averaged and read by one linear
layer (``MeanPooledClassifier``: a text's two scores, or with ``sentences`` one sentence's score)."""

from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModel, AutoModelForSequenceClassification
from transformers.modeling_outputs import SequenceClassifierOutput

from model.config import SENTENCES
from model.names import LABELS

MEAN_POOLED_HEAD_FILE = "mean_pooled_head.safetensors"


class MeanPooledClassifier(torch.nn.Module):
    """An encoder whose token states are averaged (as sentence-transformers checkpoints were
    trained to be read) and fed to one linear layer: no tanh pooler that bounds the logits.
    ``outputs``: a score per class, or one score (a sentence's share of a review's log-odds)."""

    def __init__(self, encoder, outputs: int = len(LABELS), dropout: float = 0.1):
        super().__init__()
        self.encoder = encoder
        self.base_model_prefix = "encoder"
        self.dropout = torch.nn.Dropout(dropout)
        self.classifier = torch.nn.Linear(encoder.config.hidden_size, outputs)

    @classmethod
    def from_pretrained(cls, location: str | Path, outputs: int = len(LABELS)) -> "MeanPooledClassifier":
        """The encoder at ``location``, with the head saved beside it if there is one, else a new one."""
        model = cls(AutoModel.from_pretrained(location, add_pooling_layer=False), outputs)
        head = Path(location) / MEAN_POOLED_HEAD_FILE
        if head.is_file():
            model.classifier.load_state_dict(load_file(head))
        return model.eval()  # as transformers' from_pretrained: no dropout until training asks for it

    def save_pretrained(self, directory: Path) -> None:
        self.encoder.save_pretrained(directory)
        save_file({k: v.contiguous() for k, v in self.classifier.state_dict().items()}, directory / MEAN_POOLED_HEAD_FILE)

    def forward(self, input_ids=None, attention_mask=None, inputs_embeds=None, **_) -> SequenceClassifierOutput:
        states = self.encoder(input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1)
        return SequenceClassifierOutput(logits=self.classifier(self.dropout(pooled)))


def sequence_classifier(location: str | Path, pooling: str):
    """A two-class classifier over the checkpoint at ``location``: the checkpoint's own
    classification head (``cls``: first token, tanh pooler), a mean-pooled linear head, or
    (``sentences``) a mean-pooled head that scores one sentence (``BertClassifier`` adds them up)."""
    if pooling == "mean":
        return MeanPooledClassifier.from_pretrained(location)
    if pooling == SENTENCES:
        return MeanPooledClassifier.from_pretrained(location, outputs=1)
    return AutoModelForSequenceClassification.from_pretrained(
        location,
        num_labels=len(LABELS),
        id2label=dict(enumerate(LABELS)),
        label2id={label: i for i, label in enumerate(LABELS)},
    )
