"""Should BERT's offset be added once per text (the default before) or once per sentence?

For each build directory (a finished build, e.g. of ``scripts/studies/ablation.py``), its served BERT is
scored as trained on the evaluation reviews, the catalogue, the length table's texts
(``model.lengths``), SST-2 (--sst2) and the prior_reviews unlabeled reviews its offset is
fitted on; then each way of adding the offset is fitted there as the calibrate step does and
applied. One line per build and way: accuracy per set and band, ECE on evaluation and SST-2.

    HF_HUB_OFFLINE=1 python scripts/studies/offset_study.py --sst2 ../shared/data/sst2_dev.tsv \\
        --imdb ../shared/data/aclImdb_v1.tar.gz /tmp/ablation/plain-minilm-sentences/{42,43,44}
"""

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
from sqlalchemy import select

from app.db import Review, latest_run, make_engine, session_scope
from app.settings import Settings
from model.bert import BertClassifier
from model.config import PER_SENTENCE, PER_TEXT, Sources, SplitConfig
from model.data import read_sst2, read_splits, sample_unlabeled
from model.devices import resolve_device
from model.lengths import BAND_NAMES, band_accuracies, length_set
from model.metrics import accuracy, expected_calibration_error, fit_offset
from model.names import BERT, CATALOGUE, EVAL, POSITIVE


def reviews(database: str, split: str) -> tuple[list[str], list[str]]:
    with session_scope(make_engine(database)) as session:
        rows = session.execute(select(Review.text, Review.label).where(Review.split == split)).all()
    return [r.text for r in rows], [r.label for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("builds", type=Path, nargs="+")
    parser.add_argument("--sst2", type=Path, required=True)
    parser.add_argument("--imdb", required=True)
    parser.add_argument("--prior-reviews", type=int, default=1000)
    args = parser.parse_args()
    short = read_sst2(args.sst2)
    pool = None
    for build in args.builds:
        with session_scope(make_engine(Settings(data_dir=build).database)) as session:
            built = latest_run(session).config  # the build's own seed and splits
        settings = Settings(data_dir=build, **{k: v for k, v in built.items() if k in SplitConfig.model_fields})
        if pool is None:  # the unlabeled reviews are the same whatever the split settings
            pool = read_splits(Sources(imdb=args.imdb), SplitConfig.of(settings), build, unlabeled=True).unlabeled
        model = BertClassifier.load(settings.models_dir / BERT, resolve_device("cpu"))
        model.calibration = replace(model.calibration, offset_per=PER_SENTENCE)  # so that raw_scores counts the sentences read
        sets = {name: reviews(settings.database, split) for name, split in (("eval", EVAL), ("catalogue", CATALOGUE))}
        texts, labels, bands = length_set(*sets["eval"])
        sets.update(lengths=(texts, labels), sst2=short)
        scored = {name: model.raw_scores(texts_) for name, (texts_, _) in sets.items()}
        prior = model.raw_scores([r.text for r in sample_unlabeled(pool, args.prior_reviews, settings.seed)])
        for way in ("none", PER_TEXT, PER_SENTENCE):
            units = (lambda u: u) if way == PER_SENTENCE else (lambda u: np.ones_like(u))
            b = 0.0 if way == "none" else fit_offset(prior[0], 0.5, 1.0, units(prior[1]))
            p = {name: 1 / (1 + np.exp(-(s[:, 1] - s[:, 0] + b * units(u)))) for name, (s, u) in scored.items()}
            acc = {name: accuracy(sets[name][1], p[name]) for name in ("eval", "catalogue", "sst2")}
            gold = {name: np.array([x == POSITIVE for x in sets[name][1]]) for name in ("eval", "sst2")}
            ece = {name: expected_calibration_error(gold[name], p[name]) for name in gold}
            by_band = band_accuracies(labels, p["lengths"], bands)
            print(
                f"{build} offset {way} {b:+.3f}: eval {acc['eval']:.3f} catalogue {acc['catalogue']:.3f} "
                f"sst2 {acc['sst2']:.3f} (positive {np.mean(p['sst2'] >= 0.5):.0%}); bands "
                + " ".join(f"{n} {a:.3f}" for n, a in zip(BAND_NAMES, by_band))
                + f"; ECE eval {ece['eval']:.3f} sst2 {ece['sst2']:.3f} (untempered)",
                flush=True,
            )


if __name__ == "__main__":
    main()
