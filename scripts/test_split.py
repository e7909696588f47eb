"""Accuracy and ECE of a build's trained models on the whole IMDB test split (25,000 reviews).

The catalogue and the evaluation set are samples of the test split; this scores every test
review, once, with the models in DATA_DIR/models (the teacher too, after a distill build).
One line per model.

    HF_HUB_OFFLINE=1 python scripts/test_split.py --data-dir data [--models bert teacher] [--imdb PATH]

On 2 CPU cores MiniLM takes about 10 minutes, MPNet over an hour.
"""

import argparse
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from app.settings import Settings
from model.bert import BertClassifier
from model.config import Sources
from model.data import locate_archive, read_archive
from model.devices import resolve_device
from model.metrics import classification_report
from model.names import MODELS, TEACHER
from model.trained import load_trained, model_dir

CHUNK = 256  # reviews per model call, one progress step each


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--imdb", help="Path or URL of the archive (default: the build's setting).")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=[*MODELS, TEACHER])
    args = parser.parse_args()
    settings = Settings(data_dir=args.data_dir, **({"imdb": args.imdb} if args.imdb else {}))
    reviews = [r for r in read_archive(locate_archive(settings.group(Sources), settings.data_dir)) if r.split == "test"]
    texts, gold = [r.text for r in reviews], [r.label for r in reviews]
    device = resolve_device(settings.device)
    for name in args.models:
        if name == TEACHER:
            model = BertClassifier.load(model_dir(settings.models_dir, TEACHER), device)
        else:
            model = load_trained(name, settings.models_dir, device)
        started = time.perf_counter()
        chunks = tqdm(range(0, len(texts), CHUNK), desc=f"Score {name}", unit="chunk")
        p_positive = np.concatenate([model.predict_proba(texts[i : i + CHUNK])[:, 1] for i in chunks])
        report = classification_report(gold, p_positive.tolist())
        print(
            f"{name}: accuracy {report['accuracy']:.4f}, ECE {report['ece']:.3f} on the {report['n']:,} test-split "
            f"reviews ({time.perf_counter() - started:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
