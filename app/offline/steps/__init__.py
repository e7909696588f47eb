"""The steps of ``textflix build``, in order: data, then for each model, the cheap one first, its
training, its predictions of the catalogue and its explanations (``predict_MODEL``, ``explain_MODEL``:
the site shows a model once they are done), the served BERT model calibrated before it predicts; then
the evaluation reviews' predictions, evaluate, the highlights against people's (``--rationales``), BERT's
word shares checked and the learning curve (``build_steps``). The distill
recipe trains a teacher and pseudo-labels unlabeled reviews before it trains the served BERT model.
``app.offline.pipeline`` runs them.

A module per part of the build, in the order they run: ``data`` (the archive read), ``training``
(the models, and the distill recipe's teacher and pseudo-labels), ``calibration`` (the served BERT
model's offset and temperature), ``scoring`` (predict and explain, a batch of reviews at a time) and
``evaluation`` (the models' metrics and the learning curve, for /about), ``rationales`` (the
highlights against the passages people marked in ERASER's movie reviews, for /about) and ``word_shares``
(BERT's words, on samples: removing them, and against the words people marked, for /about).
"""

__all__ = ["build_steps"]

from app.offline.pipeline import Step
from app.offline.steps.calibration import Calibrate
from app.offline.steps.data import ReadData
from app.offline.steps.evaluation import Evaluate, LearningCurve
from app.offline.steps.rationales import Rationales
from app.offline.steps.scoring import Explain, Predict
from app.offline.steps.training import PseudoLabelling, Train, TrainStudent, TrainTeacher
from app.offline.steps.word_shares import WordShares
from model.config import DISTILL
from model.names import EVAL, MAIN_MODEL, MODELS, STUDENT

# `textflix up` serves the site once this step is done: the catalogue, every page with Analyze off. A
# background build does every step after it while the site is up, which shows each model once its predict
# step is recorded (``app.db.models_ready``), its highlights as its explain step commits them: NB-SVM within
# minutes, BERT once trained, /about's figures last.
LAST_STEP_OF_THE_SITE = ReadData.name


def build_steps(recipe: str) -> list[Step]:
    """The steps of a build with ``recipe`` (model.config.RecipeConfig), in order."""
    steps: list[Step] = [ReadData()]
    for model in MODELS:  # NB-SVM first: it is ready in a minute or two, BERT in many
        if recipe == DISTILL and model == STUDENT:
            steps += [TrainTeacher(), PseudoLabelling(), TrainStudent(model)]
        else:
            steps.append(Train(model))
        if model == MAIN_MODEL:
            steps.append(Calibrate(steps[-1]))
        steps += [Predict(model), Explain(model)]
    return [*steps, Predict(split=EVAL), Evaluate(), Rationales(), WordShares(), LearningCurve()]
