"""Generates the classifier's weights (1/weights.npy) and labels.txt.

The classifier names the dominant colour of an image. Each label has a
prototype colour; the logit of a label is the negative squared distance
between the image's mean colour and the prototype, divided by a temperature,
all in the normalized space the preprocess model outputs. Expanded, that
distance is linear in the mean colour (the |x|^2 term is the same for every
label and cancels in the softmax), so the model is one small linear layer:

    logits = mean_rgb @ W + b,  W = 2 p / T,  b = -|p|^2 / T

Deterministic: run it again and the files come out the same.

    python3 examples/model_repository/classifier/generate_weights.py
"""
import os

import numpy as np

# The same normalization as preprocess/1/model.py.
MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])
TEMPERATURE = 2.0

PROTOTYPES = [
    ("red", (0.85, 0.10, 0.10)),
    ("orange", (0.95, 0.55, 0.10)),
    ("yellow", (0.95, 0.90, 0.15)),
    ("green", (0.15, 0.65, 0.20)),
    ("cyan", (0.15, 0.80, 0.85)),
    ("blue", (0.15, 0.25, 0.85)),
    ("purple", (0.50, 0.20, 0.65)),
    ("pink", (0.95, 0.60, 0.75)),
    ("brown", (0.50, 0.30, 0.15)),
    ("white", (0.95, 0.95, 0.95)),
    ("gray", (0.50, 0.50, 0.50)),
    ("black", (0.05, 0.05, 0.05)),
]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    prototypes = (np.array([rgb for _, rgb in PROTOTYPES]) - MEAN) / STD  # [labels, 3]
    weights = (2.0 * prototypes.T / TEMPERATURE).astype(np.float32)  # [3, labels]
    bias = (-(prototypes**2).sum(axis=1) / TEMPERATURE).astype(np.float32)  # [labels]
    # One [4, labels] matrix: rows 0-2 are W, row 3 is b (.npy has no timestamps).
    np.save(os.path.join(here, "1", "weights.npy"), np.vstack([weights, bias[None, :]]))
    with open(os.path.join(here, "labels.txt"), "w", encoding="utf-8") as f:
        f.write("".join(f"{name}\n" for name, _ in PROTOTYPES))


if __name__ == "__main__":
    main()
