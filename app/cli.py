"""The ``textflix`` command: build, report, serve, up, export.

Flags are generated from ``Settings``: ``--data-dir`` is the field ``data_dir``
and the environment variable ``TEXTFLIX_DATA_DIR``; a flag beats the variable.
"""

import argparse
import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import MutableMapping
from contextlib import contextmanager
from pathlib import Path

from pydantic import SecretStr, ValidationError

from app.db import database_problem, display_url, make_engine
from app.logs import configure_logging, quiet_transformers
from app.offline.summary import summary
from app.settings import ApiLimits, BuildEngine, Compute, Pages, Server, Settings, Storage
from app.web.export import WRITERS
from model.config import ConfigGroup, LimeConfig, Sources

FLAG_NAMES = {"database_url": "--database"}
# Each command takes the flags of these groups; "build" also takes every group that shapes the build.
COMMANDS: dict[str, tuple[str, list[type[ConfigGroup]]]] = {
    "build": ("Run the offline pipeline (resumable) and print a summary.", [Storage, Compute, BuildEngine, Sources]),
    "report": ("Print the latest run record.", [Storage]),
    "serve": ("Start the web server on the database.", [Storage, Compute, Server, Pages, LimeConfig, ApiLimits]),
    "up": (
        "Build the database's catalogue if it is missing, serve it at once, and do the rest of the build in the "
        "background: the site shows each model as soon as it is ready.",
        [Storage, Compute, BuildEngine, Sources, Server, Pages, LimeConfig, ApiLimits],
    ),
    "export": ("Write every catalogue review with its predictions, explanations and their trust figures.", [Storage]),
}
# Each command's own arguments, beside the flags of its settings groups: (flag, argparse keywords with a dest).
OPTIONS: dict[str, list[tuple[str, dict]]] = {
    "report": [("--json", dict(dest="as_json", action="store_true", help="Print JSON."))],
    "export": [
        ("--format", dict(dest="export_format", choices=tuple(WRITERS), default="jsonl", help="JSON Lines or CSV.")),
        ("--output", dict(dest="output", type=Path, help="The file to write; standard output without it.")),
    ],
}
BUILDING = {"build", "up"}
# uvicorn restarts a worker that does not answer its supervisor's ping within this many seconds
# (its default, 5, is short for a worker whose CPU is busy with model calls).
WORKER_PING_TIMEOUT_S = 30
PR_SET_PDEATHSIG = 1  # prctl(2)
log = logging.getLogger("textflix")


class CommandError(Exception):
    """A command cannot do its work; the message says why, in one sentence."""


def command_fields(command: str, settings_type: type[Settings]) -> list[str]:
    """The settings fields that ``command`` takes as flags, in group order."""
    groups = [settings_type.group_class(group) for group in COMMANDS[command][1]]
    if command in BUILDING:
        groups += settings_type.build_groups()
    fields = dict.fromkeys(name for group in groups for name in group.model_fields)
    return [name for name in fields if not (settings_type.model_fields[name].json_schema_extra or {}).get("env_only")]


def parser(settings_type: type[Settings] = Settings) -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="textflix", description=__doc__.splitlines()[0])
    commands = top.add_subparsers(dest="command", required=True)
    for name, (help_text, _) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        for field in command_fields(name, settings_type):
            info = settings_type.model_fields[field]
            flag = FLAG_NAMES.get(field, "--" + field.replace("_", "-"))
            env = f"TEXTFLIX_{field.upper()}"
            kwargs = {"dest": field, "default": argparse.SUPPRESS, "help": f"{info.description} [{env}]"}
            if info.annotation is bool:
                kwargs["action"] = argparse.BooleanOptionalAction
            sub.add_argument(flag, **kwargs)
        for flag, kwargs in OPTIONS.get(name, ()):
            sub.add_argument(flag, **kwargs)
    return top


def main(argv: list[str] | None = None, settings_type: type[Settings] = Settings) -> int:
    args = vars(parser(settings_type).parse_args(argv))
    command = args.pop("command")
    options = {kwargs["dest"]: args.pop(kwargs["dest"]) for _, kwargs in OPTIONS.get(command, ())}
    configure_logging()
    try:
        settings = settings_type(**args)
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
    them without end, which `docker stop` cuts short with SIGKILL)."""
    return {
        "proxy_headers": bool(settings.trusted_proxies),
        "forwarded_allow_ips": settings.trusted_proxies or None,
        "timeout_graceful_shutdown": settings.shutdown_grace_s,
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
    settings it was built with (--recipe auto made concrete), which the rest must be built with."""
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
    Every setting reaches it as a variable, so it cannot make --recipe auto concrete itself: ``settings``
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


COMMAND_FUNCTIONS = {"build": build, "report": report, "serve": serve, "up": up, "export": export}


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
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8", newline="") as out:
            yield out
        partial.replace(path)
    except OSError as error:
        raise CommandError(f"Cannot write {path}: {error.strerror or error}.") from None
    finally:
        partial.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
