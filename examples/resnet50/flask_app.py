"""The "before" of the Flask-to-Triton article: ResNet-50 behind a Flask endpoint.

POST /predict with the image file as the body (JPEG or PNG) answers the
top-5 classes as JSON, one request at a time per worker, with the same
preprocessing as the Triton pipeline (examples/model_repository/preprocess)
and the same TorchScript file Triton's PyTorch backend serves
(make_models.py's model_repository/resnet50/1/model.pt):

    python3 -m gunicorn --chdir examples/resnet50 -w 2 -b 127.0.0.1:5000 flask_app:app
    python3 examples/resnet50/flask_app.py           (Flask's own server; PORT, default 5000)

MODEL_REPOSITORY overrides where the models are; TORCH_THREADS sets
torch.set_num_threads (default: torch's, one per core).
"""
import io
import os
import sys
import types

import numpy as np
import torch
from flask import Flask, jsonify, request
from PIL import Image
from werkzeug.serving import WSGIRequestHandler

HERE = os.path.dirname(os.path.abspath(__file__))
REPOSITORY = os.environ.get("MODEL_REPOSITORY", os.path.join(HERE, "model_repository"))
PREPROCESS = os.path.join(HERE, "..", "model_repository", "preprocess", "1", "model.py")

# model.py imports Triton's Python-backend module; only its preprocess() is used here.
sys.modules.setdefault("triton_python_backend_utils", types.ModuleType("triton_python_backend_utils"))
namespace = {}
with open(PREPROCESS) as source:
    exec(compile(source.read(), PREPROCESS, "exec"), namespace)
preprocess = namespace["preprocess"]

if "TORCH_THREADS" in os.environ:
    torch.set_num_threads(int(os.environ["TORCH_THREADS"]))
model = torch.jit.load(os.path.join(REPOSITORY, "resnet50", "1", "model.pt")).eval()
with open(os.path.join(REPOSITORY, "resnet50", "labels.txt")) as f:
    labels = f.read().strip().split("\n")

app = Flask(__name__)


@app.post("/predict")
def predict():
    try:
        image = np.asarray(Image.open(io.BytesIO(request.get_data())).convert("RGB"))
    except Exception as error:  # PIL raises several kinds for a body that is not an image
        return jsonify(error=f"not an image: {error}"), 400
    with torch.inference_mode():
        scores = model(torch.from_numpy(preprocess(image[None])))[0].numpy()
    top = np.argsort(-scores, kind="stable")[:5]
    return jsonify(top5=[{"label": labels[i], "score": float(scores[i])} for i in top])


if __name__ == "__main__":
    WSGIRequestHandler.protocol_version = "HTTP/1.1"  # keep-alive, as gunicorn and the Node services do
    app.run(host="127.0.0.1", port=int(os.environ.get("PORT", "5000")), threaded=True)
