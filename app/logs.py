"""What textflix prints as it works: its own log lines plain on the console, and of the
libraries' only what matters (alembic's warnings, transformers' errors, no progress bars)."""

import logging


def configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)


def quiet_transformers() -> None:
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
