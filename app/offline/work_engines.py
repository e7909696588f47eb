"""Where the per-review steps compute: in this process (``--engine local``, the default) or
as a Ray Data pipeline (``--engine ray``, ``pip install -e '.[ray]'``).

Both engines compute the units of ``app.offline.review_work`` with ``app.offline.review_work.Worker`` and write the
results with ``app.offline.review_work.write_results``, each batch in its own transaction on the driver
(this process), so they write the same rows, and a build may resume under the other
engine. The Ray engine puts the units in a dataset of small blocks, ``map_batches`` them
through an actor pool (one actor per CPU, or per GPU when the cluster has GPUs; each loads
the models once, from files the driver ships through the object store, so no actor needs
this machine's disk), and writes each output block as it comes, in the order of the units.

The engine is not part of the build config: it changes where rows are computed, not what they are.
"""

import json
import logging
import os
import socket
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from app.db import session_scope
from app.logs import quiet_transformers
from app.offline.pipeline import BuildError, Pipeline
from app.offline.review_work import Task, Worker, reviews_in, units, write_results
from model.config import LimeConfig, WordLimeConfig
from model.trained import load_trained, model_dir

log = logging.getLogger("textflix")
LOCAL, RAY = "local", "ray"  # app.settings.EngineConfig.engine
RAY_INSTALL = "pip install -e '.[ray]'"
# A Ray started by the build: its object store holds the units and the models' files only.
RAY_OBJECT_STORE_BYTES = 1024**3
RAY_CONNECT_TIMEOUT_S = 5  # how long the address of an existing cluster may take to answer


def run_tasks(build: Pipeline, plan: Sequence[tuple[Task, list[int]]], per_block: int) -> dict:
    """Compute and store ``plan`` (each task with the ids of its pending reviews) with the
    engine the settings name; ``per_block``: units per Ray block (per write). Returns the
    facts for the run record."""
    plan = [(task, ids) for task, ids in plan if ids]
    if not plan:
        return {"engine": build.settings.engine}
    if build.settings.engine == RAY:
        return run_ray(build, plan, per_block)
    return run_local(build, plan)


class Bars:
    """The driver's progress bars, one per task in plan order: each opens when the previous
    one is full (results come in the order of the units). The reviews of every task are counted
    to the build's progress too (``Pipeline.step_progress``)."""

    def __init__(self, plan: Sequence[tuple[Task, list[int]]], build: Pipeline):
        self.plan = [(task, len(ids)) for task, ids in plan]
        self.build = build
        self.enabled = build.progress
        self.bar: tqdm | None = None
        self.next = 0
        self.left = 0  # reviews of the open bar's task not yet written
        self.done, self.total = 0, sum(total for _, total in self.plan)
        build.step_progress(0, self.total, "reviews")
        self.open_next()

    def open_next(self) -> None:
        self.close()
        if self.next < len(self.plan):
            task, total = self.plan[self.next]
            self.bar = tqdm(total=total, desc=task.description, unit="review", disable=not self.enabled)
            self.next += 1
            self.left = total

    def update(self, reviews: int) -> None:
        self.bar.update(reviews)
        self.done += reviews
        self.build.step_progress(self.done, self.total, "reviews")
        self.left -= reviews
        if self.left <= 0:
            self.open_next()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def store(build: Pipeline, results: Sequence[dict], bars: Bars) -> None:
    """Write a batch of results in one transaction, then count them on the bars."""
    with session_scope(build.engine) as session:
        write_results(session, results)
    for result in results:
        bars.update(reviews_in(result))


def settings_worker(build: Pipeline, load) -> Worker:
    s = build.settings
    return Worker(load, s.group(LimeConfig), s.group(WordLimeConfig))


def run_local(build: Pipeline, plan: Sequence[tuple[Task, list[int]]]) -> dict:
    worker = settings_worker(build, build.model)
    bars = Bars(plan, build)
    try:
        for task, ids in plan:
            for unit in units(build.engine, task, ids):
                store(build, worker([unit]), bars)
    finally:
        bars.close()
    return {"engine": LOCAL}


# -- Ray ---------------------------------------------------------------------------------


@dataclass
class RayCluster:
    where: str  # in words, for the log
    cpus: int
    gpus: int


def import_ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise BuildError(f"--engine ray needs Ray, which is not installed: {RAY_INSTALL}") from None
    return ray


def check_reachable(address: str) -> None:
    """BuildError at once when nothing answers at ``address`` (``ray.init`` would retry for minutes)."""
    if address in ("auto", LOCAL):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError) as error:
        raise BuildError(
            f"Cannot reach a Ray cluster at {address} ({error}); check --ray-address "
            "(HOST:PORT of the head node, ray://HOST:PORT for Ray Client, or auto), or leave it out to start a local Ray."
        ) from None


@contextmanager
def ray_cluster(address: str | None) -> Iterator[RayCluster]:
    """Ray started on this machine (``address`` None) or joined at ``address``; shut down (or
    left) when the block ends."""
    ray = import_ray()
    import app
    import model

    check_reachable(address or LOCAL)
    # The build's own code travels with the job, so the actors run this very version of it.
    options = dict(logging_level=logging.ERROR, runtime_env={"py_modules": [app, model]})
    if address is None:  # on loopback only, sized to this machine
        cpus = len(os.sched_getaffinity(0))
        options.update(address=LOCAL, num_cpus=cpus, include_dashboard=False,
                       object_store_memory=RAY_OBJECT_STORE_BYTES, _node_ip_address="127.0.0.1")  # fmt: skip
    else:
        options.update(address=address)
    try:
        ray.init(**options)
    except Exception as error:
        raise BuildError(
            f"Cannot start or join Ray at {address or 'this machine'} ({type(error).__name__}: {error}); "
            "check --ray-address, or leave it out to start a local Ray."
        ) from None
    try:
        resources = ray.cluster_resources()
        where = "a local Ray on this machine" if address is None else f"the Ray cluster at {address}"
        yield RayCluster(where, int(resources.get("CPU", 0)), int(resources.get("GPU", 0)))
    finally:
        ray.shutdown()


def quiet_ray_data(ray) -> None:
    """The driver's progress bars only: none of Ray Data's, and its units in order."""
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.enable_auto_log_stats = False
    context.execution_options.preserve_order = True  # results come in the order of the units
    logging.getLogger("ray.data").setLevel(logging.ERROR)


def packed_models(build: Pipeline, names: Sequence[str]) -> dict[str, dict[str, bytes]]:
    """The files of the trained models ``names``, to load them where this machine's disk is not."""
    packed = {}
    for name in names:
        directory = model_dir(build.settings.models_dir, name)
        if not directory.is_dir():
            build.model(name)  # raises the BuildError that says what to do
        packed[name] = {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()}
    return packed


class RayWorker:
    """One actor of the pool: unpacks the models' files, loads each model once, then computes
    the units of each block it is given with ``app.offline.review_work.Worker``."""

    def __init__(
        self, models, names: list[str], device: str, cpu_int8: bool, lime: LimeConfig, word_lime: WordLimeConfig
    ):
        import ray

        from model.devices import resolve_device

        quiet_transformers()
        packed = ray.get(models[0])  # a list around the reference, so Ray hands over the reference
        torch_device = resolve_device(device)
        with tempfile.TemporaryDirectory(prefix="textflix-models-") as folder:
            for name, files in packed.items():
                for relative, blob in files.items():
                    path = Path(folder, name, relative)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(blob)
            loaded = {name: load_trained(name, Path(folder), torch_device, cpu_int8=cpu_int8) for name in names}
        self.worker = Worker(loaded.__getitem__, lime, word_lime)

    def __call__(self, batch: dict) -> dict:
        results = self.worker([json.loads(unit) for unit in batch["unit"]])
        return {"result": [json.dumps(result) for result in results]}


def run_ray(build: Pipeline, plan: Sequence[tuple[Task, list[int]]], per_block: int) -> dict:
    ray = import_ray()
    s = build.settings
    items = [{"unit": json.dumps(unit)} for task, ids in plan for unit in units(build.engine, task, ids)]
    names = sorted({task.model for task, _ in plan})
    with ray_cluster(s.ray_address) as cluster:
        gpus = cluster.gpus if s.device != "cpu" else 0
        if s.device == "cuda" and not gpus:
            raise BuildError(f"device cuda was asked for, but {cluster.where} has no GPU.")
        blocks = -(-len(items) // per_block)
        actors = max(1, min(gpus or cluster.cpus, blocks))
        log.info(
            "Ray: %s (%d CPUs, %d GPUs): %d actors with 1 %s each, the models loaded once per actor.",
            cluster.where, cluster.cpus, cluster.gpus, actors, "GPU" if gpus else "CPU",
        )  # fmt: skip
        quiet_ray_data(ray)
        models = ray.put(packed_models(build, names))
        dataset = ray.data.from_items(items, override_num_blocks=blocks).map_batches(
            RayWorker,
            batch_size=None,  # a block at a time: each output block is one write
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=1,
            num_gpus=1 if gpus else 0,
            fn_constructor_kwargs=dict(models=[models], names=names, device="cuda" if gpus else s.device,
                                       cpu_int8=s.cpu_int8, lime=s.group(LimeConfig),
                                       word_lime=s.group(WordLimeConfig)),  # fmt: skip
        )
        bars = Bars(plan, build)
        try:
            for batch in dataset.iter_batches(batch_size=None, batch_format="numpy"):
                store(build, [json.loads(result) for result in batch["result"]], bars)
        finally:
            bars.close()
    return {"engine": RAY, "actors": actors, "gpus_per_actor": 1 if gpus else 0}
