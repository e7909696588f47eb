"""The learning curve as the run record keeps it (``metrics["learning_curve"]``).

The build's curve step writes ``{"sizes": [...], "seeds": N, "<model>": {"mean": [...],
"std": [...], "runs": [[accuracy per seed] per size]}}``, with None where a model was not
trained at a size. Records from before the seeds hold one flat list of accuracies per
model; ``readable`` turns them into the same shape, so every reader sees one format.
"""

from statistics import fmean, stdev

LEARNING_CURVE = "learning_curve"  # its key in the run record's metrics


def spread(accuracies: list[float] | None) -> tuple[float | None, float | None]:
    """The mean of one point's accuracies (one per seed) and their sample standard deviation,
    which a single seed does not have; both None where the model was not trained."""
    if accuracies is None:
        return None, None
    return fmean(accuracies), stdev(accuracies) if len(accuracies) > 1 else None


def series(runs: list[list[float] | None]) -> dict:
    """A model's part of the curve from its accuracies at each size (None: not trained there)."""
    points = [spread(accuracies) for accuracies in runs]
    return {"mean": [mean for mean, _ in points], "std": [std for _, std in points], "runs": runs}


def readable(curve: dict) -> dict:
    """``curve`` in the current format; an older record's points become single-seed ones."""
    if "seeds" in curve:
        return curve
    models = {name: values for name, values in curve.items() if name != "sizes"}
    return {
        "sizes": curve["sizes"],
        "seeds": 1,
        **{name: series([None if value is None else [value] for value in values]) for name, values in models.items()},
    }


def point_text(mean: float | None, std: float | None, missing: str = "–") -> str:
    """One point as text: "0.812 ± 0.011", the mean alone without a spread, ``missing`` without a mean."""
    if mean is None:
        return missing
    return f"{mean:.3f}" if std is None else f"{mean:.3f} ± {std:.3f}"
