"""A trained model's folder: written whole or not at all, with a small JSON file of facts.

The facts file (``MODEL_META_FILE``) holds the label order, the training config and
the build's fingerprint, by which a rerun knows whether the folder is still current.
"""

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from model.files import atomic_write
from model.names import LABELS, MODEL_META_FILE


@contextmanager
def atomic_directory(directory: Path, meta: dict) -> Iterator[Path]:
    """Yield a scratch folder to write a model into; it replaces ``directory`` only when complete."""
    partial = directory.with_name(directory.name + ".part")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    yield partial
    (partial / MODEL_META_FILE).write_text(json.dumps({"labels": list(LABELS), **meta}, indent=2))
    shutil.rmtree(directory, ignore_errors=True)
    partial.rename(directory)


def read_meta(directory: Path, what: str = "") -> dict:
    """The facts file of a model folder; FileNotFoundError when there is none."""
    path = directory / MODEL_META_FILE
    if not path.is_file():
        kind = f"{what} " if what else ""
        raise FileNotFoundError(f"{directory}: no trained {kind}model ({MODEL_META_FILE} missing).")
    return json.loads(path.read_text())


def saved_fingerprint(directory: Path) -> str | None:
    """The build fingerprint a model folder was trained for, or None without a readable one."""
    try:
        return read_meta(directory).get("fingerprint")
    except (FileNotFoundError, ValueError):
        return None


def update_meta(directory: Path, facts: dict) -> None:
    """Add ``facts`` to the facts file of a model folder, replacing it whole."""
    merged = {**read_meta(directory), **facts}
    with atomic_write(directory / MODEL_META_FILE) as file:
        json.dump(merged, file, indent=2)
