"""The steps of ``textflix build``, in order: data, one training step per model, calibrate, predict
(the catalogue), explain, predict (the evaluation reviews), evaluate, learning curve (``build_steps``);
the distill recipe trains a teacher and pseudo-labels unlabeled reviews before it trains the served
BERT model. ``app.offline.pipeline`` runs them.

A module per part of the build, in the order they run: ``data`` (the archive read), ``training``
(the models, and the distill recipe's teacher and pseudo-labels), ``calibration`` (the served BERT
model's offset and temperature), ``scoring`` (predict and explain, a batch of reviews at a time) and
``evaluation`` (the models' metrics and the learning curve, for /about).
"""

from app.offline.pipeline import Step
from app.offline.steps.calibration import Calibrate
from app.offline.steps.data import ReadData
from app.offline.steps.evaluation import Evaluate, LearningCurve
from app.offline.steps.rationales import Rationales
from app.offline.steps.scoring import Explain, Predict
from app.offline.steps.training import PseudoLabelling, Train, TrainStudent, TrainTeacher
from model.config import DISTILL
from model.names import EVAL, MAIN_MODEL, MODELS, STUDENT

# `textflix up` serves the site once this step is done: the steps after it feed /about only, and a
# background build does them while the site is up.
LAST_STEP_OF_THE_SITE = Explain.name


def build_steps(recipe: str) -> list[Step]:
    """The steps of a build with ``recipe`` (model.config.RecipeConfig), in order."""
    if recipe == DISTILL:
        others = [Train(model) for model in MODELS if model != STUDENT]
        served = TrainStudent(STUDENT)
        training = [*others, TrainTeacher(), PseudoLabelling(), served]
    else:
        training = [Train(model) for model in MODELS]
        served = training[MODELS.index(MAIN_MODEL)]
    return [ReadData(), *training, Calibrate(served), Predict(), Explain(), Predict(EVAL), Evaluate(), Rationales(), LearningCurve()]
