"""Does GLUE's tokenization of SST-2 cost a build's served model accuracy?

Its SST-2 accuracy on the sentences as given ("does n't", "it 's", "journey .") and with that
tokenization undone, as people type ("doesn't", "it's", "journey."), a line each.

    python scripts/studies/sst2_tokenization.py --data-dir data --sst2 ../shared/data/sst2_dev.tsv
"""

import argparse
import re
from pathlib import Path

import torch

from app.settings import Settings
from model.data import read_sst2
from model.metrics import classification_report
from model.names import BERT
from model.trained import load_trained


def detokenized(text: str) -> str:
    """``text`` with GLUE's tokenization undone: contractions and punctuation joined to their word."""
    text = re.sub(r" n't\b", "n't", text)
    text = re.sub(r" '(s|re|ve|ll|d|m)\b", r"'\1", text)
    text = re.sub(r" ([,.;:!?])", r"\1", text)
    return text.replace("-lrb- ", "(").replace(" -rrb-", ")").replace("`` ", '"').replace(" ''", '"')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="A built data directory.")
    parser.add_argument("--sst2", type=Path, required=True, help="SST-2's dev.tsv.")
    args = parser.parse_args()
    texts, labels = read_sst2(args.sst2)
    model = load_trained(BERT, Settings(data_dir=args.data_dir).models_dir, torch.device("cpu"))
    changed = sum(detokenized(t) != t for t in texts)
    for name, read in (("as given", texts), ("detokenized", [detokenized(t) for t in texts])):
        p_positive = model.predict_proba(read)[:, 1]
        report = classification_report(labels, p_positive.tolist())
        print(f"SST-2 {name}: accuracy {report['accuracy']:.3f}, called positive {(p_positive >= 0.5).mean():.3f} "
              f"({changed} of {len(texts)} sentences changed by detokenizing)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
