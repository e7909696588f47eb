"""All configuration in one place.

``Settings`` is the union of typed groups (``model.config.ConfigGroup``), each declared
next to the code it configures. Every field is an environment variable
``TEXTFLIX_<NAME>`` and, for the commands whose groups include it, a ``--set NAME=VALUE``;
the few a user needs are flags too, ``--<name>`` (``app.cli``). The fields of the groups that
``shapes_build`` make up the build config: the run record stores it, and a rerun with other
values is refused (``app.offline.pipeline``). What else a build setting is known by is declared
on its field (``model.config.BuildSetting``).
Adding a setting is adding a field to its group.
"""

from pathlib import Path
from typing import Annotated, Literal, TypeVar

from limits import parse_many
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from model.config import (
    DATA_VERSION,
    BertConfig,
    CalibrationConfig,
    ConfigGroup,
    LimeConfig,
    NbsvmConfig,
    RecipeConfig,
    ReviewsSource,
    ServingConfig,
    Sources,
    SplitConfig,
    TeacherConfig,
    WordLimeConfig,
    WordSharesConfig,
    count_or_all,
)

Group = TypeVar("Group", bound=ConfigGroup)


class Storage(ConfigGroup):
    data_dir: Path = Field(Path("data"), description="Where downloads and trained models go.")
    database_url: str | None = Field(
        None, description="SQLAlchemy database URL; default sqlite:///DATA_DIR/textflix.db."
    )

    @property
    def database(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'textflix.db'}"

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"


class Compute(ConfigGroup):
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="Where BERT runs.")
    cpu_int8: bool = Field(
        False,
        description="Run BERT's linear layers in int8 where it runs on the CPU (dynamic quantization, one text "
        "per forward pass): a short review answers in 2/3 of the time, 97.6 per cent of labels as in float32, LIME "
        "about 13 per cent slower (docs/benchmarks/serving-speed.md).",
    )


class BuildEngine(ConfigGroup):
    """Where the per-review build steps compute (app.offline.work_engines). Not part of the build config:
    both engines write the same rows, so a build may resume under the other one."""

    engine: Literal["local", "ray"] = Field(
        "local",
        description="Where predict and explain run: in this process, or as Ray Data pipelines "
        "(pip install -e '.[ray]').",
    )
    ray_address: str | None = Field(
        None,
        description="The Ray cluster of --engine ray: HOST:PORT of its head, ray://HOST:PORT (Ray Client) "
        "or auto; default: start a Ray on this machine for the step.",
    )


class CurveConfig(ConfigGroup):
    shapes_build = True

    # NoDecode: the environment variable is read like --set, not as JSON only.
    learning_curve: Annotated[list[int], NoDecode] = Field(
        [100, 200, 500, 1000, 2000, 5000],
        description="Training-set sizes of the learning curve, comma-separated; BERT is trained at the "
        "sizes up to train_size, and above it only on CUDA. Empty: no curve.",
    )
    curve_seeds: int = Field(
        3, ge=1, description="Seeds per point of the learning curve (each draws its own sample and training run)."
    )
    curve_eval_size: Annotated[int, Field(ge=1)] | Literal["all"] = Field(
        500, description="Evaluation reviews every point of the learning curve is measured on: a seeded sample "
        "of the evaluation set, the same for each point (reading them is most of a BERT point's cost), or 'all'."
    )  # fmt: skip

    _curve_eval_size = field_validator("curve_eval_size", mode="before")(count_or_all)

    @field_validator("learning_curve", mode="before")
    @classmethod
    def _learning_curve(cls, value):
        if isinstance(value, str):  # "100,200", "100 200", or JSON's "[100, 200]"
            return [int(n) for n in value.strip("[] ").replace(",", " ").split()]
        return value


class Server(ConfigGroup):
    host: str = Field("127.0.0.1", description="Address the server listens on.")
    # NoDecode: the environment variable is read like --set, not as JSON only.
    trusted_proxies: Annotated[list[str], NoDecode] = Field(
        [],
        description="Addresses (or networks, or *) of the proxies in front of the server, comma-separated: only "
        "from these is X-Forwarded-For read as the client's address. Default none: the client is the connecting "
        "address, and a request with a proxy's header is not taken as from this machine.",
    )
    port: int = Field(8000, description="Port the server listens on.")
    workers: int = Field(
        1, ge=1,
        description="Server processes sharing the port; each loads its own copy of the models and has its own "
        "micro-batcher and TEXTFLIX_MAX_WORK_IN_FLIGHT.",
    )  # fmt: skip
    shutdown_grace_s: float = Field(
        8.0, ge=0,
        description="Seconds a stopping server (SIGTERM, Ctrl-C) lets the requests under way finish, such as "
        "explanations, before it stops them (503): under the 10 s that `docker stop` waits before it kills.",
    )  # fmt: skip

    max_header_bytes: int = Field(
        64 * 1024, ge=1024,
        description="Most bytes of a request's line and headers together; beyond them the answer is 431, before the "
        "rest is read.",
    )  # fmt: skip
    header_timeout_s: float = Field(
        10.0, gt=0,
        description="Seconds a request's line and headers may take to arrive, from their first byte (or from the "
        "connection); beyond them the answer is 408 and the connection is closed.",
    )  # fmt: skip
    body_timeout_s: float = Field(
        30.0, gt=0,
        description="Seconds a request's body may take to arrive, from the end of its headers; beyond them the answer "
        "is 408 and the connection is closed.",
    )  # fmt: skip
    send_timeout_s: float = Field(
        30.0, gt=0,
        description="Seconds a client may read nothing of an answer the server is waiting to send (such as the "
        "export); beyond them the connection is closed and the answer given up (the next export may begin).",
    )  # fmt: skip
    keep_alive_s: float = Field(
        5.0, gt=0, description="Seconds an idle connection is kept open after an answer for the client's next request."
    )

    build_poll_s: float = Field(
        3.0, gt=0,
        description="Seconds between the server's looks at the run record: a model the build has made ready "
        "(predicted and explained the catalogue with) is loaded and shown without a restart.",
    )  # fmt: skip

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _trusted_proxies(cls, value):
        if isinstance(value, str):  # "127.0.0.1,10.0.0.0/8", or JSON's '["127.0.0.1"]'
            return [part.strip(' "') for part in value.strip("[] ").split(",") if part.strip(' "')]
        return value


MAX_NOUN_CHARS = 40


class Pages(ConfigGroup):
    """The web pages."""

    titles_per_page: int = Field(48, ge=1, le=1000, description="Titles on one page of the dashboard.")
    disagreements_per_page: int = Field(20, ge=1, le=1000, description="Reviews on one page of /disagreements.")
    item_noun: str | None = Field(
        None,
        description="What the pages call the catalogue's items: game, hotel, product; 'singular/plural' where the "
        "plural is not the noun plus s, es or ies (person/people). Default: 'title' for the IMDB archive (the pages' "
        "words as ever), 'item' for a file of reviews.",
    )

    @field_validator("item_noun")
    @classmethod
    def _item_noun(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None  # TEXTFLIX_ITEM_NOUN= (empty) means the corpus's default
        forms = [" ".join(form.split()) for form in value.split("/")]
        if len(forms) > 2 or not all(forms) or len(value) > MAX_NOUN_CHARS or not value.isprintable():
            raise ValueError(
                f"{value[:60]!r} is not an item noun: write one word or a few ('game', 'airline lounge'), or "
                f"'singular/plural' ('person/people'), at most {MAX_NOUN_CHARS} printable characters"
            )
        return "/".join(forms)


class ApiLimits(ConfigGroup):
    """The JSON API, /analyze and live analysis."""

    max_text_chars: int = Field(20_000, ge=1, description="Longest review text the API and /analyze take, in characters.")
    max_texts: int = Field(64, ge=1, description="Most texts in one POST /api/predict.")
    max_body_bytes: int = Field(
        6 * 1024 * 1024, ge=1024, description="Largest request body the API reads, in bytes."
    )
    max_per_page: int = Field(100, ge=1, description="Most items on one page of a paginated API answer.")
    # Read from the environment only: a token on the command line would show in `ps`.
    api_token: SecretStr | None = Field(
        None,
        description="When set, every POST to /api/, and GET /api/export.jsonl, need `Authorization: Bearer <token>`.",
        json_schema_extra={"env_only": True},
    )
    batch_window_ms: float = Field(
        10.0, ge=0, le=1000,
        description="How long a batch waits for more requests while requests overlap (ms); 0 turns batching off.",
    )  # fmt: skip
    batch_max_texts: int = Field(512, ge=1, description="Most texts one batched model call collects.")
    inference_max_tokens: int | None = Field(
        None, ge=64, description="Padded tokens per BERT forward pass; default 2048 on CPU, 65536 on CUDA."
    )
    inference_threads: int | None = Field(
        None, ge=1,
        description="Torch threads of each live model call; default one per core. On a machine whose cores other "
        "programs keep busy, 1 is faster (scripts/bench_serving.py).",
    )  # fmt: skip
    explain_workers: int = Field(16, ge=1, description="Threads running LIME for live explanations.")
    max_explain_sentences: int = Field(
        1000, ge=1, description="Most sentences one request may ask to explain, summed over its texts."
    )
    max_explain_chars: int = Field(
        100_000, ge=1, description="Most characters one request may ask to explain, summed over its texts."
    )
    max_work_in_flight: int = Field(
        10_400, ge=1,
        description="Model passes (of 1,000 characters: the texts, and the texts LIME scores to explain them) each "
        "server process works on at once for requests larger than small ones (TEXTFLIX_SMALL_WORK_IN_FLIGHT); a "
        "request beyond them gets 429 with Retry-After. One request may take them all only where this machine's "
        "measured speed finishes it well within TEXTFLIX_ANALYSIS_TIMEOUT_S (GET /api/health: limits).",
    )  # fmt: skip
    small_work_in_flight: int = Field(
        2_600, ge=0,
        description="Model passes kept for small requests, those charged at most a quarter of them (a short "
        "prediction, 64 texts of up to 10,000 characters not explained, an explained review of up to about 1,400 "
        "characters), beside TEXTFLIX_MAX_WORK_IN_FLIGHT: no request, however large, shuts them out, and they never "
        "keep a large one out; 0: one pool for all.",
    )  # fmt: skip
    batch_max_weight: float | None = Field(
        None, ge=1,
        description="Most full-length texts (about 1,000 characters; shorter ones count for less, a request's longer "
        "ones for the 2 windows a sentence model reads of them) in one model call: a call cannot be interrupted, so "
        "this bounds how long a short request waits behind others; default 8 on CPU (one forward pass), 256 on CUDA.",
    )  # fmt: skip
    rate_limit: str = Field(
        "60/minute",
        description="Requests that make the server work (POST under /api/ and to /analyze) one client address may "
        "send, in the notation of the `limits` package: '60/minute', '5/second;300/hour'; beyond it, 429 with "
        "Retry-After. Counted per server process. Empty: no limit.",
    )
    analysis_timeout_s: float = Field(
        120.0, ge=0,
        description="Seconds an analysis (POST /api/predict, /api/reviews, /analyze) may take; beyond them its work "
        "is stopped and the answer is 503. 0: no limit.",
    )  # fmt: skip
    allow_anonymous_writes: bool = Field(
        False,
        description="Without TEXTFLIX_API_TOKEN, store reviews posted, and hand out the export, to anyone who reaches "
        "the server (through any proxy or forwarder too); off, they need the token. `textflix up` on a loopback "
        "address turns it on unless it is set, and says so.",
    )

    @field_validator("rate_limit")
    @classmethod
    def _rate_limit(cls, value: str) -> str:
        value = value.strip()
        if value:
            try:
                parse_many(value)
            except ValueError:
                raise ValueError(
                    f"{value!r} is not a rate limit: write it as '60/minute', or several as '5/second;300/hour'"
                ) from None
        return value

    @field_validator("api_token", mode="before")
    @classmethod
    def _api_token(cls, value):
        if isinstance(value, str) and not value.strip():
            return None  # TEXTFLIX_API_TOKEN= (empty) means no token
        return value


class Settings(
    BaseSettings,
    Storage,
    Compute,
    BuildEngine,
    Sources,
    ReviewsSource,
    SplitConfig,
    NbsvmConfig,
    BertConfig,
    TeacherConfig,
    RecipeConfig,
    CalibrationConfig,
    ServingConfig,
    LimeConfig,
    WordLimeConfig,
    WordSharesConfig,
    CurveConfig,
    Server,
    Pages,
    ApiLimits,
):
    model_config = SettingsConfigDict(env_prefix="TEXTFLIX_", extra="ignore")

    @classmethod
    def group_class(cls, kind: type[Group]) -> type[Group]:
        """The class of group ``kind`` these settings include (a subclass of it, if they extend it)."""
        return next(c for c in cls.__mro__ if issubclass(c, kind) and not issubclass(c, BaseSettings))

    @classmethod
    def build_groups(cls) -> list[type[ConfigGroup]]:
        """The groups whose values decide what a build produces, most derived only."""
        groups = [
            c for c in cls.__mro__ if issubclass(c, ConfigGroup) and c.shapes_build and not issubclass(c, BaseSettings)
        ]
        return [c for c in groups if not any(other is not c and issubclass(other, c) for other in groups)]

    def group(self, kind: type[Group]) -> Group:
        """The values of group ``kind``."""
        return self.group_class(kind).of(self)

    @classmethod
    def predating_values(cls) -> dict:
        """The build settings' values in run records written before they existed (``BuildSetting.predating``),
        and this code's ``data_version``'s: 1, before run records kept it."""
        return {**super().predating_values(), "data_version": 1}

    def build_config(self) -> dict:
        """The build-shaping values, JSON-ready: what the run record stores and rebuilds compare; with
        them what no setting changes: the retired settings' decided values and this code's ``data_version``."""
        values = {
            name: value
            for group in self.build_groups()
            for name, value in group.of(self).model_dump(mode="json").items()
        }
        return {**values, **self.decided_values(), "data_version": DATA_VERSION}
