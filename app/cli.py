"""The ``textflix`` command: build, report, serve, up.

Flags are generated from ``Settings``: ``--data-dir`` is the field ``data_dir``
and the environment variable ``TEXTFLIX_DATA_DIR``; a flag beats the variable.
"""

import argparse
import json
import logging
import sys

from pydantic import ValidationError

from app.db import display_url
from app.settings import ApiLimits, Compute, Server, Settings, Storage
from model.config import ConfigGroup, LimeConfig, Sources
from model.names import CATALOGUE, DISPLAY_NAMES, EVAL, MODELS, TRAIN

FLAG_NAMES = {"database_url": "--database"}
# Each command takes the flags of these groups; "build" also takes every group that shapes the build.
COMMANDS: dict[str, tuple[str, list[type[ConfigGroup]]]] = {
    "build": ("Run the offline pipeline (resumable) and print a summary.", [Storage, Compute, Sources]),
    "report": ("Print the latest run record.", [Storage]),
    "serve": ("Start the web server on the database.", [Storage, Compute, Server, LimeConfig, ApiLimits]),
    "up": (
        "Build the database if it is missing or unfinished, then serve it.",
        [Storage, Compute, Sources, Server, LimeConfig, ApiLimits],
    ),
}
BUILDING = {"build", "up"}
log = logging.getLogger("textflix")


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
        if name == "report":
            sub.add_argument("--json", action="store_true", help="Print JSON.")
    return top


def main(argv: list[str] | None = None, settings_type: type[Settings] = Settings) -> int:
    args = vars(parser(settings_type).parse_args(argv))
    command = args.pop("command")
    as_json = args.pop("json", False)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        settings = settings_type(**args)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        print(f"textflix: error: {problems}", file=sys.stderr)
        return 2
    try:
        return COMMAND_FUNCTIONS[command](settings, as_json)
    except KeyboardInterrupt:
        print("\nInterrupted: finished work is saved; run the same command again to resume.", file=sys.stderr)
        return 130
    except Exception as error:
        from app.pipeline import BuildError
        from model.bert import DeviceUnavailable
        from model.data import DataError

        if isinstance(error, (BuildError, DataError, DeviceUnavailable)):
            print(f"textflix: error: {error}", file=sys.stderr)
            return 1
        raise


def build(settings: Settings, _as_json: bool = False) -> int:
    from app.pipeline import Pipeline
    from app.steps import STEPS

    quiet_transformers()
    record = Pipeline(settings, STEPS).run()
    print(summary(record, settings))
    return 0


def report(settings: Settings, as_json: bool) -> int:
    from app.db import make_engine
    from app.main import database_problem
    from app.pipeline import BuildError, report as run_report

    problem = database_problem(settings)
    if problem:
        raise BuildError(problem)
    record = run_report(make_engine(settings.database))
    print(json.dumps(record, indent=2) if as_json else summary(record, settings))
    return 0


def serve(settings: Settings, _as_json: bool = False) -> int:
    import uvicorn

    from app.main import create_app

    quiet_transformers()
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port)
    return 0


def up(settings: Settings, _as_json: bool = False) -> int:
    build(settings)
    return serve(settings)


COMMAND_FUNCTIONS = {"build": build, "report": report, "serve": serve, "up": up}


def quiet_transformers() -> None:
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()


def summary(record: dict, settings: Settings) -> str:
    """One screen: what was built, how well each model does, how long each step took."""
    counts = record["counts"]
    lines = [
        f"Textflix run {record['run_id']} ({record['status']}) in {display_url(settings.database)}",
        f"  base model {record['base_model']}, seed {record['seed']}",
        f"  {counts.get(TRAIN, 0):,} training reviews · {counts.get(CATALOGUE, 0):,} catalogue "
        f"reviews of {counts.get('titles', 0)} titles · {counts.get(EVAL, 0):,} evaluation reviews",
        "",
        f"  {'model':8} {'set':10} {'accuracy':>8} {'F1':>6} {'ECE':>6}",
    ]
    metrics = record["metrics"]
    for model in MODELS:
        for split, m in metrics.get(model, {}).items():
            lines.append(
                f"  {model:8} {split:10} {m['accuracy']:8.3f} {m['f1']:6.3f} {m['ece']:6.3f}"
            )
    if curve := metrics.get("learning_curve"):
        names = " / ".join(DISPLAY_NAMES[model] for model in MODELS)
        points = [
            f"{size}: " + " / ".join("–" if curve[model][i] is None else f"{curve[model][i]:.3f}" for model in MODELS)
            for i, size in enumerate(curve["sizes"])
        ]
        lines += ["", f"  learning curve, evaluation accuracy (training reviews: {names})", "  " + " · ".join(points)]
    timings = record["timings"]
    lines += [
        "",
        "  " + " · ".join(f"{step} {seconds:,.0f} s" for step, seconds in timings.items())
        + f" · total {sum(timings.values()):,.0f} s",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
