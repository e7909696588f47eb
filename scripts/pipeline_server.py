"""The baseline of scripts/bench_serving.py: a plain FastAPI handler calling a Hugging Face
``pipeline("text-classification")`` on Textflix's fine-tuned BERT, served by uvicorn.

    python scripts/pipeline_server.py --model data/models/bert [--host 127.0.0.1] [--port 8001]

POST /api/predict takes ``{"texts": [...]}`` as Textflix does and answers
``{"results": [{"bert": {"label": ..., "p_positive": ...}}]}``; GET /api/health says
``{"models": {"bert": true}}``. The pipeline reads the folder's weights and its own
classification head as Textflix's ``sequence_classifier`` does (``pooling: cls``); it knows
nothing of a fitted temperature, nor of head-and-tail truncation (it keeps the first 256
tokens), so the benchmark feeds it texts that fit the window and checks the answers agree.
"""

import argparse

import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel
from transformers import pipeline

from model.names import POSITIVE


class Texts(BaseModel):
    texts: list[str]


def create_app(model: str, max_length: int) -> FastAPI:
    classifier = pipeline("text-classification", model=model, device="cpu")
    app = FastAPI(title="Baseline: a plain transformers pipeline")

    @app.get("/api/health")
    def health() -> dict:
        return {"models": {"bert": True}}

    @app.post("/api/predict")
    def predict(body: Texts) -> dict:
        answers = classifier(body.texts, top_k=None, truncation=True, max_length=max_length)
        return {
            "results": [
                {"bert": {"label": max(scores, key=lambda s: s["score"])["label"],
                          "p_positive": next(s["score"] for s in scores if s["label"] == POSITIVE)}}
                for scores in answers
            ]
        }  # fmt: skip

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="The fine-tuned BERT folder (DATA_DIR/models/bert).")
    parser.add_argument("--max-length", type=int, default=256, help="Tokens the pipeline keeps of a text.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args()
    uvicorn.run(create_app(args.model, args.max_length), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
