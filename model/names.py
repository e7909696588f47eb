"""The names every part of Textflix shares: labels, models, splits, file names.

``model/`` and ``app/`` both import them from here; nothing else defines them.
"""

__all__ = ["BERT", "CATALOGUE", "DISPLAY_NAMES", "EVAL", "IMDB", "LENGTHS", "MAIN_MODEL", "MODELS", "NBSVM",
           "NEGATIVE", "POSITIVE", "SST2", "TEACHER"]  # fmt: skip

NEGATIVE, POSITIVE = "negative", "positive"
# Column order of every classifier's ``predict_proba``.
LABELS = (NEGATIVE, POSITIVE)
# Short forms: IMDB's folder names (train/pos, train/neg), also the pages' CSS classes.
SHORT_LABELS = {NEGATIVE: "neg", POSITIVE: "pos"}

# The two models, in the order the pages show them (baseline left, BERT right).
NBSVM, BERT = "nbsvm", "bert"
MODELS = (NBSVM, BERT)
MAIN_MODEL = BERT  # the model the pages show when they show one
DISPLAY_NAMES = {NBSVM: "NB-SVM", BERT: "BERT"}
WORD_LEVEL_MODEL = NBSVM  # the model explained word by word too (the report compared both levels)
# The distill recipe (model.config.RecipeConfig): a teacher, not shown on the site, labels
# unlabeled reviews for the student, which is the model the site shows as BERT.
TEACHER, STUDENT = "teacher", BERT
STUDENT_NETWORK = "student"  # what the API calls the network of STUDENT, beside the TEACHER that may read for it

# Review.split: the role a review plays. Reviews posted by users are shown with the
# catalogue, so they take the catalogue split (and source "user").
TRAIN, CATALOGUE, EVAL = "train", "catalogue", "eval"
# ERASER's annotated movie reviews (--rationales): a split of their own, never shown in the catalogue;
# also the run record's metrics key of how far the models' highlights agree with the annotators'.
RATIONALES = "rationales"
# The build step that checks BERT's word shares (model.word_shares), the table they are stored in, and the
# run record's metrics key of how faithful and plausible they are.
WORD_SHARES = "word_shares"
# Evaluation sets that are not reviews of the database: one-line reviews (SST-2, --sst2), and
# the length table of the run record's metrics (model.lengths).
SST2, LENGTHS = "sst2", "lengths"

# Review.source: the IMDB archive, a user's own file of reviews (--reviews), a user of the site (whose labels
# are not gold), or ERASER's movie reviews. A build reads one corpus: the archive or the file.
IMDB, FILE, USER, ERASER = "imdb", "file", "user", "eraser"
CORPORA = (IMDB, FILE)  # the sources whose labels are gold
IMDB_CORPUS = "IMDB"  # the run record's counts["corpus"] of a build on the archive (absent before issue 53)
IMDB_NOUN = "title"  # IMDb's word for its entries, which the pages have always used
FILE_NOUN = "item"

# Explanation.level: one weight per sentence (both models) or per word (WORD_LEVEL_MODEL).
SENTENCE, WORD = "sentence", "word"

# What a trained model's folder holds besides its weights: labels, config, fingerprint.
MODEL_META_FILE = "textflix.json"


def label_of(p_positive: float) -> str:
    """The predicted label for a probability of "positive"."""
    return POSITIVE if p_positive >= 0.5 else NEGATIVE


def short_label(label: str) -> str:
    """"pos" or "neg" for a label (the CSS class of its colour)."""
    return SHORT_LABELS[label]


def plural(noun: str) -> str:
    """English's regular plural of ``noun``: box → boxes, city → cities, game → games."""
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in ("", *"aeiou"):
        return noun[:-1] + "ies"
    return noun + "s"


def item_nouns(corpus: str, item_noun: str | None) -> tuple[str, str]:
    """What the items of ``corpus`` are called, singular and plural: ``item_noun`` ("game", or
    "singular/plural"), or the corpus's default (``IMDB_NOUN``, ``FILE_NOUN``)."""
    singular, _, given_plural = (item_noun or (IMDB_NOUN if corpus == IMDB_CORPUS else FILE_NOUN)).partition("/")
    return singular, given_plural or plural(singular)


def items_called(count: int, corpus: str, item_noun: str | None) -> str:
    """``count`` items of ``corpus`` in words: "1 game", "3,000 titles"."""
    singular, many = item_nouns(corpus, item_noun)
    return f"{count:,} {singular if count == 1 else many}"
