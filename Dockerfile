# CPU by default. For CUDA: --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128
# (the CUDA wheels carry their own libraries; run with --gpus all).
FROM python:3.11-slim

ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    TEXTFLIX_HOST=0.0.0.0 \
    TEXTFLIX_DATA_DIR=/app/data

WORKDIR /app
RUN pip install torch==2.13.0 --index-url "$TORCH_INDEX"
COPY pyproject.toml README.md ./
COPY app app
COPY model model
COPY templates templates
COPY static static
COPY scripts scripts
RUN pip install -e .

VOLUME /app/data
EXPOSE 8000
# Builds the database on first start (downloading the IMDB archive), then serves.
CMD ["textflix", "up"]
