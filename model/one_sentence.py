"""Which network of a served BERT reads a text: its one-sentence reader (the distill recipe's teacher,
which reads one-line reviews better than its student) for a text of one sentence, when it has one."""

__all__ = ["ONE_SENTENCE_READER", "network_reading", "one_sentence_reader_of"]

from collections.abc import Sequence

from model.config import DISTILL
from model.names import STUDENT_NETWORK, TEACHER

# the key, in a model's facts file, of the folder beside its own of the model that reads its texts of one
# sentence (model.config.ServingConfig)
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
