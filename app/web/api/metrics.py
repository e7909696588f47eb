"""GET /api/metrics: the latest build's figures of each model, as /about and `textflix report` show them."""

from fastapi import APIRouter, Depends
from sqlalchemy.orm import Session

from app.db import latest_run
from app.web.deps import get_session
from app.web.errors import error_responses
from app.web.schemas import Metrics
from model.metrics import SKEW_FIGURES
from model.names import LENGTHS, MODELS, TEACHER

router = APIRouter(prefix="/api", tags=["metrics"], responses=error_responses(503))


@router.get("/metrics", response_model=Metrics, response_model_exclude_none=True)
def metrics(session: Session = Depends(get_session)) -> dict:
    """Each model's figures on each evaluation set, and by length.

    Accuracy beside the majority baseline, balanced accuracy and macro-F1 (what accuracy hides on labels
    that lean one way), F1, ECE and the confusion matrix; a run recorded before a figure was kept lacks it."""
    run = latest_run(session)
    if run is None:
        return {"run_id": None, "status": None, "models": {}}
    recorded = run.record()["metrics"]
    models = {name: recorded[name] for name in (*MODELS, TEACHER) if name in recorded}
    return {"run_id": run.id, "status": run.status, "models": models, "lengths": length_metrics(recorded.get(LENGTHS))}


def length_metrics(lengths: dict | None) -> dict | None:
    """The run record's length table (``model.lengths``: each model's accuracies under its own name) by figure."""
    if lengths is None:
        return None
    return {
        "bands": lengths["bands"],
        "n": lengths["n"],
        "accuracy": {name: lengths[name] for name in MODELS if name in lengths},
        **{figure: lengths.get(figure) for figure in SKEW_FIGURES},
    }
