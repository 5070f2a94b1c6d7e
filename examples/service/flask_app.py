"""The "before" of the story: the same sentiment model behind Flask.

A typical Flask model endpoint: it imports the model code and scores each
HTTP request on its own (no batching across requests). It uses the very
scoring code of examples/model_repository/text_processor/1/model.py, so the
benchmark compares serving, not models. bench.ts starts it under gunicorn
when Flask and gunicorn are installed (Debian: python3-flask python3-gunicorn):

    python3 -m gunicorn --chdir examples/service -w 2 -k gthread --threads 4 -b 127.0.0.1:5000 flask_app:app
    python3 examples/service/flask_app.py       (Flask's dev server; PORT, default 5000)
"""
import importlib.util
import os
import sys
import types

import numpy as np
from flask import Flask, jsonify, request
from werkzeug.serving import WSGIRequestHandler

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_DIR = os.path.join(HERE, "..", "model_repository", "text_processor")

# model.py imports Triton's Python-backend module; Flask never calls it.
sys.modules.setdefault("triton_python_backend_utils", types.ModuleType("triton_python_backend_utils"))
spec = importlib.util.spec_from_file_location("text_processor", os.path.join(MODEL_DIR, "1", "model.py"))
text_processor = importlib.util.module_from_spec(spec)
spec.loader.exec_module(text_processor)

model = text_processor.TritonPythonModel()
model.lexicon = text_processor.load_lexicon(os.path.join(MODEL_DIR, "lexicon.tsv"))

app = Flask(__name__)


@app.post("/v1/sentiment")
def sentiment():
    body = request.get_json(silent=True)
    texts = body.get("texts") if isinstance(body, dict) else None
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        return jsonify(error="texts: expected a non-empty array of strings"), 400
    scores = np.empty(len(texts), dtype=np.float32)
    model.score_lexicon(texts, scores)
    return jsonify(scores=[float(s) for s in scores])


if __name__ == "__main__":
    # Flask's own threaded server, as most such endpoints start out, with
    # keep-alive on (its default HTTP/1.0 closes every connection, and the
    # benchmark would measure reconnects).
    WSGIRequestHandler.protocol_version = "HTTP/1.1"
    app.run(host="127.0.0.1", port=int(os.environ.get("PORT", "5000")), threaded=True)
