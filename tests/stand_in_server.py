"""``textflix serve`` (``app.cli.main``, flags as given) with stand-in models that take 0.1 s a call.

The shutdown tests run it as a process of its own, to send it signals:
``python tests/stand_in_server.py serve --database URL --port N ...``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import app.web.main  # noqa: E402
from app.web.analysis import ModelAnalyzer  # noqa: E402
from app.cli import main  # noqa: E402
from tests.web_fixtures import cue_model  # noqa: E402


def stand_in_analyzer(settings):
    models = {"nbsvm": cue_model(0.1), "bert": cue_model(0.1)}
    return ModelAnalyzer(models, settings, "cpu (stand-in models)", call_weight=1)


app.web.main.load_analyzer = stand_in_analyzer
sys.exit(main())
