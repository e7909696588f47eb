"""``textflix serve`` (``app.cli.main``, flags as given) with stand-in models that take 0.1 s a call.

The shutdown tests run it as a process of its own, to send it signals:
``python -m tests.stand_in_server serve --database URL --port N ...`` from the repository root.
"""

import sys

import app.web.main
from app.cli import main
from app.web.analysis import ModelAnalyzer
from tests.web_fixtures import cue_model


def stand_in_analyzer(settings, ready):
    models = {name: cue_model(0.1) for name in ready}
    return ModelAnalyzer(models, settings, "cpu (stand-in models)", call_weight=1)


app.web.main.load_analyzer = stand_in_analyzer  # what ``app.web.main.load_models`` calls
sys.exit(main())
