"""How long the build has left: the running step's seconds left (``eta_s``), and for each model not yet on
the site the seconds until its predict step is done (``ready_in_s``), both in the run record's progress.

A step says what work it still has (``Step.work``): how many characters a network reads, a training step's
counted as the forward and backward passes it runs (``TRAINING_PASSES`` over its trained layers). While a
step runs, its rate so far gives its seconds left, and the seconds a character costs its network on this
machine, training and reading apart (a network reads a character far cheaper than its training runs one
pass over it). A step not started yet is estimated from its work at that cost: measured for its network by
an earlier step of this build (the teacher's training times its labels until they are timed), or, for a BERT
network not timed yet, the cost of the same kind of work of the one timed last, scaled by the two networks'
sizes (``network_shape``) and by SCALED_COST_FACTOR (the student's training estimated from the teacher's,
even while the teacher labels). A step whose work cannot be told (a calibration that retrains BERT), or a
network with nothing timed to scale from, leaves the estimate out: None, no figure rather than a guess.
"""

__all__ = ["SCALED_COST_FACTOR", "TRAINING_PASSES", "capped_chars", "network_shape"]

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

TRAINING_PASSES = 3  # a trained layer runs forward once and backward twice (activations' and weights' gradients)
CHARS_PER_TOKEN = 4  # an English review's characters per BERT word piece, near enough to cap what a window reads
# A network's training cost scaled from another's by their sizes came out about 3 times too low in the
# default builds on both CPUs measured: the sentence-reading MiniLM student's step took 0.71 s against 0.25 s
# scaled from the MPNet teacher's training with native bfloat16, 2.7 s against 0.92 s without (a small network
# uses a CPU's cores less fully, and sentences make short passes); scripts/studies/precision_study.py.
# A reading scaled from another network's reading takes the same factor (not measured).
SCALED_COST_FACTOR = 3.0
TIMED_AFTER_S = 2.0  # a rate is taken once a step has run this long since its first report (and done some work)


@dataclass(frozen=True)
class Work:
    """What a step still has to do: ``reads`` characters read by ``network`` (forward-pass equivalents), of
    which the step's progress reports count ``counted`` (a training counts its optimizer steps, not the frozen
    layers' one pass before them). ``size``: the network's size (``network_shape``), for BERT networks, so that
    another network's cost can be scaled to it. ``trains``: whether the step trains the network (else it reads)."""

    network: str
    reads: float
    counted: float | None = None
    size: float | None = None
    trains: bool = False

    @property
    def counted_reads(self) -> float:
        return self.reads if self.counted is None else self.counted


def network_shape(checkpoint: Path | str) -> tuple[float, int] | None:
    """A transformer's size, its multiply-adds per token near enough (its encoder layers' weights), and its
    number of layers, from the checkpoint's ``config.json``; None when there is none to read."""
    try:
        config = json.loads((Path(checkpoint) / "config.json").read_text())
        hidden, inner, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return float(layers * (4 * hidden * hidden + 2 * hidden * inner)), int(layers)


def capped_chars(texts: Sequence[str], cap: int | None) -> float:
    """The characters a model reads of ``texts``, each cut to ``cap`` (a window's worth; None: all)."""
    return float(sum(len(text) if cap is None else min(len(text), cap) for text in texts))


class StepClock:
    """The running step's rate: from its first progress report (so loading and the frozen layers' pass
    before it do not count) to the latest."""

    def __init__(self, work: Work | None):
        self.work = work
        self.first: tuple[float, int] | None = None
        self.latest: tuple[float, int, int] | None = None

    def report(self, done: int, total: int, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self.first is None or done < self.first[1]:
            self.first = (now, done)
        self.latest = (now, done, total)

    def timed(self) -> bool:
        """Whether the step has run long enough since its first report, and done work, to have a rate."""
        if self.first is None or self.latest is None:
            return False
        return self.latest[1] > self.first[1] and self.latest[0] - self.first[0] >= TIMED_AFTER_S

    def seconds_per_unit(self) -> float | None:
        if not self.timed():
            return None
        (start, done_then), (now, done, _) = self.first, self.latest
        return (now - start) / (done - done_then)

    def eta_s(self) -> float | None:
        """The step's seconds left at its rate so far; None before it is timed."""
        per_unit = self.seconds_per_unit()
        if per_unit is None:
            return None
        _, done, total = self.latest
        return max(total - done, 0) * per_unit

    def cost_per_read(self) -> float | None:
        """What a character costs the step's network, from its rate so far: None before it is timed, or
        when its work is not known."""
        per_unit = self.seconds_per_unit()
        if per_unit is None or self.work is None or not self.work.counted_reads or not self.latest[2]:
            return None
        return per_unit * self.latest[2] / self.work.counted_reads


class Costs:
    """The seconds a character costs each network on this machine, as timed in this build, its training's and
    its reading's apart."""

    def __init__(self):
        self.per_read: dict[tuple[str, bool], float] = {}  # by network, and whether it trains
        self.sized: dict[bool, tuple[str, float]] = {}  # by whether it trains: the BERT network timed last, its size

    def timed(self, work: Work, seconds_per_read: float) -> None:
        self.per_read[work.network, work.trains] = seconds_per_read
        if work.size:
            self.sized[work.trains] = (work.network, work.size)

    def of(self, work: Work) -> float | None:
        """A character's cost for ``work``: its network's, timed at the same kind of work (training or reading)
        or else at the other; for a BERT network not timed yet, scaled by size from the BERT network timed last
        at the same kind of work, or else at the other."""
        kinds = (work.trains, not work.trains)
        for trains in kinds:
            if (work.network, trains) in self.per_read:
                return self.per_read[work.network, trains]
        if not work.size:
            return None
        for trains in kinds:
            if trains in self.sized:
                network, size = self.sized[trains]
                return self.per_read[network, trains] * work.size / size * SCALED_COST_FACTOR
        return None

    def seconds(self, work: Work | None) -> float | None:
        """``work``'s estimated seconds; None when it or its network's cost is not known."""
        if work is None:
            return None
        if not work.reads:
            return 0.0
        cost = self.of(work)
        return None if cost is None else work.reads * cost
