"""The offline build (``textflix build``): the pipeline that runs the steps, the steps, and the
per-review work of predict and explain with the engines that compute it. Imports nothing of
``app.web``."""
