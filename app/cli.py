"""The ``textflix`` command: build, report, serve, up, export, settings.

Every setting is a field of ``Settings``: ``data_dir`` is the environment variable ``TEXTFLIX_DATA_DIR``
and ``--set data_dir=VALUE``; the few a user needs (each ``Command``'s ``flags``) are flags too, ``--data-dir``.
A flag or ``--set`` beats the variable; ``textflix settings`` lists them all.
"""

import argparse
import ctypes
import difflib
import inspect
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from pydantic import SecretStr, ValidationError
from pydantic_core import to_jsonable_python
from pydantic_settings import BaseSettings

from app.db import database_problem, display_url, make_engine
from app.logs import configure_logging, quiet_transformers
from app.offline.summary import summary
from app.settings import ApiLimits, BuildEngine, Compute, Pages, Server, Settings, Storage
from app.web.export import WRITERS
from model.config import ConfigGroup, LimeConfig, Sources
from model.files import atomic_write

FLAG_NAMES = {"database_url": "--database"}
# The settings that are flags of their own, in the order of the help: the ones a user needs. Every
# other setting of a command's groups is a --set NAME=VALUE of it.
STORAGE_FLAGS = ("data_dir", "database_url")
BUILD_FLAGS = (
    *STORAGE_FLAGS, "reviews", "columns", "label_rule", "imdb", "movies", "sst2", "rationales", "device", "seed",
    "titles", "engine", "ray_address",
)  # fmt: skip
SERVE_FLAGS = (
    *STORAGE_FLAGS, "device", "host", "port", "workers", "trusted_proxies", "allow_anonymous_writes", "item_noun"
)
# `up` serves this machine (a proxy in front is `serve`'s): its trusted proxies are a --set; so is its item noun,
# to keep its help to the 15 flags a first run needs.
UP_FLAGS = tuple(
    name for name in dict.fromkeys(BUILD_FLAGS + SERVE_FLAGS) if name not in ("trusted_proxies", "item_noun")
)
EVERY_GROUP = [Storage, Compute, BuildEngine, Sources, Server, Pages, LimeConfig, ApiLimits]


class Command(NamedTuple):
    help: str
    groups: list[type[ConfigGroup]]  # the settings it takes; with ``builds``, every group that shapes the build too
    flags: tuple[str, ...] = STORAGE_FLAGS
    builds: bool = False


COMMANDS: dict[str, Command] = {
    "build": Command(
        "Run the offline pipeline (resumable) and print a summary.",
        [Storage, Compute, BuildEngine, Sources], BUILD_FLAGS, builds=True,
    ),  # fmt: skip
    "report": Command("Print the latest run record.", [Storage]),
    "serve": Command(
        "Start the web server on the database.", [Storage, Compute, Server, Pages, LimeConfig, ApiLimits], SERVE_FLAGS
    ),
    "up": Command(
        "Build the database's catalogue if it is missing, serve it at once, and do the rest of the build in the "
        "background: the site shows each model as soon as it is ready.",
        EVERY_GROUP, UP_FLAGS, builds=True,
    ),  # fmt: skip
    "export": Command(
        "Write every catalogue review with its predictions, explanations and their trust figures.", [Storage]
    ),
    "settings": Command(
        "List every setting: its environment variable, its value (from the environment and --set), its default "
        "and what it does.",
        EVERY_GROUP, (), builds=True,
    ),  # fmt: skip
}
# Each command's own arguments, beside its settings: (flag, argparse keywords with a dest).
AS_JSON = ("--json", dict(dest="as_json", action="store_true", help="Print JSON."))
OPTIONS: dict[str, list[tuple[str, dict]]] = {
    "report": [AS_JSON],
    "export": [
        ("--format", dict(dest="export_format", choices=tuple(WRITERS), default="jsonl", help="JSON Lines or CSV.")),
        ("--output", dict(dest="output", type=Path, help="The file to write; standard output without it.")),
    ],
    "settings": [AS_JSON],
}
SET_HELP = (
    "A setting, by its field name (repeatable): `textflix settings` or --help-all lists them all. "
    "It beats the setting's environment variable, TEXTFLIX_NAME."
)
# uvicorn restarts a worker that does not answer its supervisor's ping within this many seconds
# (its default, 5, is short for a worker whose CPU is busy with model calls).
WORKER_PING_TIMEOUT_S = 30
PR_SET_PDEATHSIG = 1  # prctl(2)
log = logging.getLogger("textflix")


class CommandError(Exception):
    """A command cannot do its work; the message says why, in one sentence."""


class SettingError(ValueError):
    """A --set that names no setting of the command, or one it cannot take; the message says which."""


class Invocation(NamedTuple):
    command: str
    settings: Settings
    options: dict  # the command's own arguments (OPTIONS)


def command_fields(command: str, settings_type: type[Settings]) -> list[str]:
    """The settings fields of ``command``'s groups, in group order."""
    groups = [settings_type.group_class(group) for group in COMMANDS[command].groups]
    if COMMANDS[command].builds:
        groups += settings_type.build_groups()
    return list(dict.fromkeys(name for group in groups for name in group.model_fields))


def env_only(settings_type: type[Settings], name: str) -> bool:
    """Whether setting ``name`` is read from its environment variable only (a secret would show in `ps`)."""
    return bool((settings_type.model_fields[name].json_schema_extra or {}).get("env_only"))


def flag_of(name: str) -> str:
    return FLAG_NAMES.get(name, "--" + name.replace("_", "-"))


def parser(settings_type: type[Settings] = Settings) -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="textflix", description=__doc__.splitlines()[0])
    commands = top.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        sub = commands.add_parser(name, help=command.help, description=command.help)
        for field in command.flags:
            info = settings_type.model_fields[field]
            help_text = f"{info.description} [TEXTFLIX_{field.upper()}]"
            kwargs = {"dest": field, "default": argparse.SUPPRESS, "help": help_text}
            if info.annotation is bool:
                kwargs["action"] = argparse.BooleanOptionalAction
            sub.add_argument(flag_of(field), **kwargs)
        if set(command_fields(name, settings_type)) - set(command.flags):
            sub.add_argument(
                "--set", dest="set_values", action="append", default=[], metavar="NAME=VALUE", help=SET_HELP
            )
            sub.add_argument(
                "--help-all", action=HelpAll, command=name, settings_type=settings_type,
                help="Show this help and every setting this command takes, then exit.",
            )  # fmt: skip
        for flag, kwargs in OPTIONS.get(name, ()):
            sub.add_argument(flag, **kwargs)
    return top


class HelpAll(argparse.Action):
    """``--help-all``: the help, then every setting of the command, as ``textflix settings`` lists them."""

    def __init__(self, option_strings, dest, command: str, settings_type: type[Settings], **kwargs):
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, **kwargs)
        self.command, self.settings_type = command, settings_type

    def __call__(self, parser, namespace, values, option_string=None):
        parser.print_help()
        print(f"\nEvery setting of `textflix {self.command}` (--set NAME=VALUE, or TEXTFLIX_NAME):\n")
        print(settings_text(settings_listing(self.settings_type, command_fields(self.command, self.settings_type))))
        parser.exit()


def parse_command(argv: list[str] | None = None, settings_type: type[Settings] = Settings) -> Invocation:
    """The command ``argv`` runs, with its settings (its flags and --set over the environment) and its own
    options; ``SettingError`` or pydantic's ``ValidationError`` for a setting it cannot take."""
    args = vars(parser(settings_type).parse_args(argv))
    command = args.pop("command")
    options = {kwargs["dest"]: args.pop(kwargs["dest"]) for _, kwargs in OPTIONS.get(command, ())}
    for name, value in set_values(command, args.pop("set_values", []), settings_type).items():
        if name in args:
            raise SettingError(f"{name} is given twice: {flag_of(name)} and --set {name}=")
        args[name] = value
    return Invocation(command, settings_type(**args), options)


def set_values(command: str, given: list[str], settings_type: type[Settings]) -> dict[str, str]:
    """The values of ``--set NAME=VALUE`` arguments by field name (the last one of a name wins), as text for
    pydantic to read as it reads the environment variable."""
    fields = command_fields(command, settings_type)
    values = {}
    for argument in given:
        name, equals, value = argument.partition("=")
        name = name.strip().lower().replace("-", "_")
        if not equals or not name:
            raise SettingError(f"--set {argument}: write it as --set NAME=VALUE")
        if name not in fields:
            raise SettingError(unknown_setting(command, name, fields, settings_type))
        if env_only(settings_type, name):
            raise SettingError(
                f"--set {name}: this setting is read only from TEXTFLIX_{name.upper()}: on a command line it would "
                "show in `ps`"
            )
        values[name] = value
    return values


def unknown_setting(command: str, name: str, fields: list[str], settings_type: type[Settings]) -> str:
    """Why ``name`` is no setting of ``command``: another command's, or a misspelling of the closest names."""
    if name in settings_type.model_fields:
        others = [other for other in COMMANDS if other != "settings" and name in command_fields(other, settings_type)]
        return f"--set {name}: not a setting of `textflix {command}` (it is one of `textflix {' | '.join(others)}`)"
    closest = difflib.get_close_matches(name, fields, n=3, cutoff=0.5)
    hint = f"; the closest: {', '.join(closest)}" if closest else ""
    return f"--set {name}: no such setting of `textflix {command}` (`textflix settings` lists them){hint}"


def main(argv: list[str] | None = None, settings_type: type[Settings] = Settings) -> int:
    configure_logging()
    try:
        command, settings, options = parse_command(argv, settings_type)
    except SettingError as error:
        print(f"textflix: error: {error}", file=sys.stderr)
        return 2
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        print(f"textflix: error: {problems}", file=sys.stderr)
        return 2
    try:
        return COMMAND_FUNCTIONS[command](settings, **options)
    except KeyboardInterrupt:
        print("\nInterrupted: finished work is saved; run the same command again to resume.", file=sys.stderr)
        return 130
    except Exception as error:
        if not explained(error):
            raise
        print(f"textflix: error: {error}", file=sys.stderr)
        return 1


def explained(error: Exception) -> bool:
    """Whether ``error`` says in one sentence what went wrong, so that no traceback is needed."""
    if isinstance(error, CommandError):
        return True
    from app.offline.pipeline import BuildError  # imports torch: only when it can be one
    from model.checkpoints import CheckpointError
    from model.data import DataError
    from model.devices import DeviceUnavailable

    return isinstance(error, (BuildError, CheckpointError, DataError, DeviceUnavailable))


def build(settings: Settings) -> int:
    from app.offline.pipeline import Pipeline
    from app.offline.steps import build_steps

    quiet_transformers()
    record = Pipeline(settings, build_steps).run()
    print(summary(record, settings))
    return 0


def report(settings: Settings, as_json: bool = False) -> int:
    from app.offline.pipeline import report as run_report

    record = run_report(existing_engine(settings))
    print(json.dumps(record, indent=2) if as_json else summary(record, settings))
    return 0


def uvicorn_options(settings: Settings) -> dict:
    """How uvicorn serves the app, besides where: X-Forwarded-For read only from ``trusted_proxies``
    (uvicorn's own default trusts 127.0.0.1, which would take a local proxy's word for who writes),
    and at shutdown ``shutdown_grace_s`` for the requests under way (uvicorn's default waits for
    them without end, which `docker stop` cuts short with SIGKILL); httptools with the bounds on a
    connection's head, body, unread answer and idle time (``app.web.http_limits``), and no WebSocket
    protocol (the app has no WebSocket route)."""
    from app.web.http_limits import limited_protocol

    return {
        "proxy_headers": bool(settings.trusted_proxies),
        "forwarded_allow_ips": settings.trusted_proxies or None,
        "timeout_graceful_shutdown": settings.shutdown_grace_s,
        "http": limited_protocol(settings),
        "ws": "none",
        "timeout_keep_alive": settings.keep_alive_s,
    }


def serve(settings: Settings) -> int:
    import uvicorn

    from app.web.main import create_app

    quiet_transformers()
    if settings.workers == 1:
        uvicorn.run(create_app(settings), host=settings.host, port=settings.port, **uvicorn_options(settings))
        return 0
    hand_to_workers(settings)
    log.info(
        "Serving on http://%s:%d with %d worker processes; each loads its own copy of the models (%s MB of model "
        "files; each worker logs its memory once they are loaded) and has its own micro-batcher and its own "
        "%s model passes in flight (TEXTFLIX_MAX_WORK_IN_FLIGHT).",
        settings.host, settings.port, settings.workers, f"{files_size(settings.models_dir) / 1e6:,.0f}",
        f"{settings.max_work_in_flight:,}",
    )  # fmt: skip
    uvicorn.run(
        "app.cli:worker_app", factory=True, host=settings.host, port=settings.port, workers=settings.workers,
        timeout_worker_healthcheck=WORKER_PING_TIMEOUT_S, **uvicorn_options(settings),
    )  # fmt: skip
    return 0


def worker_app():
    """The app of one worker process of ``serve --workers N``, with the settings ``serve`` left in the environment."""
    from app.web.main import create_app

    configure_logging()
    quiet_transformers()
    return create_app(Settings())


def worker_environment(settings: Settings) -> dict[str, str | None]:
    """The ``TEXTFLIX_*`` variables from which ``Settings()`` rebuilds ``settings`` (None: unset)."""
    environment = {}
    for name, value in settings.model_dump(mode="json").items():
        secret = getattr(settings, name)
        if isinstance(secret, SecretStr):
            value = secret.get_secret_value()
        environment[f"TEXTFLIX_{name.upper()}"] = value if value is None or isinstance(value, str) else json.dumps(value)
    return environment


def put_in_environment(settings: Settings, environment: MutableMapping[str, str]) -> None:
    """Set and unset in ``environment`` the variables from which ``Settings()`` rebuilds ``settings``."""
    for variable, value in worker_environment(settings).items():
        if value is None:
            environment.pop(variable, None)
        else:
            environment[variable] = value


def hand_to_workers(settings: Settings) -> None:
    """Put ``settings`` in this process's environment, which uvicorn's worker processes inherit."""
    put_in_environment(settings, os.environ)
    rebuilt = Settings()
    lost = [name for name in Settings.model_fields if getattr(rebuilt, name) != getattr(settings, name)]
    if lost:
        raise CommandError(f"The worker processes would not get the same {', '.join(lost)}; run one worker.")


def files_size(directory: Path) -> int:
    """Bytes in the files under ``directory`` (0 when it is missing)."""
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


def up(settings: Settings) -> int:
    """Build the catalogue (the data step), then serve it while a background build does the rest: the site
    shows each model once it is ready, and /about the build's figures once they are in."""
    settings = with_local_writes(settings)
    rest, built = build_for_the_site(settings)
    if not rest:
        return serve(settings)
    with background_build(built, rest):
        return serve(settings)


def with_local_writes(settings: Settings) -> Settings:
    """``settings``, with anonymous writes on when they serve the loopback without a token and leave
    ``allow_anonymous_writes`` unset: the one person at this machine stores reviews without a token.
    Said on the console, since anyone whose requests a forwarder on this machine passes on may then write too."""
    from app.web.limits import on_loopback

    if settings.api_token is not None or "allow_anonymous_writes" in settings.model_fields_set or not on_loopback(settings.host):
        return settings
    log.warning(
        "Anonymous writes are on: without TEXTFLIX_API_TOKEN, `textflix up` on %s stores reviews posted, and hands out "
        "the export, without a token, to anyone whose requests reach this port (a proxy or forwarder on this machine "
        "passes on others' too). Set TEXTFLIX_API_TOKEN, or TEXTFLIX_ALLOW_ANONYMOUS_WRITES=0, to need the token.",
        settings.host,
    )  # fmt: skip
    return settings.model_copy(update={"allow_anonymous_writes": True})


def build_for_the_site(settings: Settings) -> tuple[list[str], Settings]:
    """Run the build up to the last step the site needs; the steps still to do after it, and the
    settings it was built with (recipe auto made concrete), which the rest must be built with."""
    from app.offline.pipeline import Pipeline
    from app.offline.steps import LAST_STEP_OF_THE_SITE, build_steps

    quiet_transformers()
    pipeline = Pipeline(settings, build_steps)
    record = pipeline.run(until=LAST_STEP_OF_THE_SITE)
    rest = pipeline.steps_to_do(record)
    if not rest:
        print(summary(record, settings))
    return rest, pipeline.settings


@contextmanager
def background_build(settings: Settings, steps: list[str]):
    """``textflix build`` with ``settings`` in a process of its own, its output on this console, for
    as long as the block runs; it dies with this process, so a killed ``up`` resumes as a killed build does.
    Every setting reaches it as a variable, so it cannot make recipe auto concrete itself: ``settings``
    must be the concrete ones the build so far stored (else it refuses the database as built with others)."""
    environment = dict(os.environ)
    put_in_environment(settings, environment)
    process = subprocess.Popen([sys.executable, "-m", "app.cli", "build"], env=environment, preexec_fn=dies_with_parent())
    log.info(
        "The catalogue is in and the site opens now; the rest of the build (%s) goes on in a background process "
        "(pid %d), its progress here and on /about, and the site shows each model as soon as its explain step "
        "is done, without a restart.", ", ".join(steps), process.pid,
    )  # fmt: skip
    try:
        yield
    finally:
        if process.poll() is None:
            log.info("Stopping the background build (pid %d); `textflix up` or `textflix build` resumes it.", process.pid)
            process.terminate()
        process.wait()


def dies_with_parent():
    """A ``preexec_fn`` that has the kernel send the child SIGTERM when this process dies, even by
    SIGKILL (Linux); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork, called after it
    return lambda: prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def export(settings: Settings, export_format: str = "jsonl", output: Path | None = None) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    engine = existing_engine(settings)
    try:
        with output_stream(output) as out:
            count = WRITERS[export_format](engine, out)
    except SQLAlchemyError as error:
        raise CommandError(
            f"Cannot read the database at {display_url(settings.database)} ({error.__class__.__name__}): "
            "run `textflix build` to build it."
        ) from None
    if output is not None:
        print(f"Wrote {count:,} reviews to {output}.", file=sys.stderr)
    return 0


def list_settings(settings: Settings, as_json: bool = False) -> int:
    listing = settings_listing(type(settings), list(type(settings).model_fields), settings)
    print(json.dumps(listing, indent=2) if as_json else settings_text(listing))
    return 0


COMMAND_FUNCTIONS = {
    "build": build, "report": report, "serve": serve, "up": up, "export": export, "settings": list_settings
}  # fmt: skip


def settings_listing(settings_type: type[Settings], fields: list[str], settings: Settings | None = None) -> list[dict]:
    """Settings ``fields``, JSON-ready, group by group: each one's group, name, environment variable, value in
    ``settings`` (when given), default, description, and whether it is read from the environment only."""
    values = settings.model_dump(mode="json") if settings is not None else {}
    listing = []
    for group, names in declaring_groups(settings_type, fields).items():
        for name in names:
            info = settings_type.model_fields[name]
            listing.append({
                "group": group, "name": name, "environment_variable": f"TEXTFLIX_{name.upper()}",
                **({"value": values[name]} if settings is not None else {}),
                "default": to_jsonable_python(info.get_default(call_default_factory=True)),
                "description": info.description, "env_only": env_only(settings_type, name),
            })  # fmt: skip
    return listing


def declaring_groups(settings_type: type[Settings], fields: list[str]) -> dict[str, list[str]]:
    """``fields`` under the name of the settings group that declares each, in the settings' order of groups."""
    groups: dict[str, list[str]] = {}
    placed = set()
    for group in settings_type.__mro__:
        if issubclass(group, ConfigGroup) and not issubclass(group, BaseSettings):
            for name in inspect.get_annotations(group):
                if name in fields and name not in placed:
                    groups.setdefault(group.__name__, []).append(name)
                    placed.add(name)
    return groups


def settings_text(listing: list[dict]) -> str:
    """``settings_listing`` for a person: a block per group, a line per setting, its description below it."""
    lines, group = [], None
    for setting in listing:
        if setting["group"] != group:
            group = setting["group"]
            lines += [""] * bool(lines) + [group]
        name, default = setting["name"], shown(setting["default"])
        if "value" not in setting:
            head = f"{name}  (default {default})"
        elif setting["value"] == setting["default"]:
            head = f"{name} = {default}"
        else:
            head = f"{name} = {shown(setting['value'])}  (default {default})"
        variable = setting["environment_variable"] + " only" * setting["env_only"]
        lines.append(f"  {head}  [{variable}]")
        lines += textwrap.wrap(setting["description"] or "", width=100, initial_indent=INDENT, subsequent_indent=INDENT)
    return "\n".join(lines)


INDENT = " " * 6  # a setting's description, under its name


def shown(value) -> str:
    """A setting's JSON-ready value as a person writes it."""
    if value is None:
        return "unset"
    return value if isinstance(value, str) and value else json.dumps(value)




def existing_engine(settings: Settings):
    """The engine of the database, which must exist (``CommandError`` says how to build it)."""
    problem = database_problem(settings.database)
    if problem:
        raise CommandError(problem)
    return make_engine(settings.database)


@contextmanager
def output_stream(path: Path | None):
    """Standard output, or ``path``, which takes its name only once it is written whole."""
    if path is None:
        yield sys.stdout
        return
    try:
        with atomic_write(path, "w", encoding="utf-8", newline="") as out:
            yield out
    except OSError as error:
        raise CommandError(f"Cannot write {path}: {error.strerror or error}.") from None


if __name__ == "__main__":
    sys.exit(main())
