# text_processor: one sentiment score in [0, 1] per text, as the public Triton
# guides' text_processor returns it: the probability that the text is positive
# (1 = positive, 0 = negative, 0.5 = neutral).
#
# execute() gets every request the dynamic batcher merged. It scores all their
# texts in one pass over one preallocated array and hands each request a view
# of its slice, so the per-request cost is only reading inputs and building
# responses.
#
# Scoring uses the small lexicon in ../lexicon.tsv (shipped with the model, no
# download). When the "hf_model_dir" parameter names a local Hugging Face model
# directory and transformers is installed, a transformers sentiment pipeline
# over that directory scores instead.
import json
import os
import re

import numpy as np
import triton_python_backend_utils as pb_utils

try:  # optional: only used when installed and configured
    from transformers import pipeline as hf_pipeline
except ImportError:
    hf_pipeline = None

WORD = re.compile(r"[a-z']+")
NEGATORS = frozenset(("not", "no", "never", "don't", "doesn't", "isn't", "wasn't", "didn't", "can't", "won't"))
INTENSIFIERS = frozenset(("very", "really", "so", "extremely", "super"))
# (1 + tanh(total / SCALE)) / 2: a strong positive word (3) alone gives about
# 0.82, a strong negative one about 0.18, no sentiment word 0.5.
SCALE = 4.0


def load_lexicon(path):
    lexicon = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            word, weight = line.split("\t")
            lexicon[word] = float(weight)
    return lexicon


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        model_dir = args.get("model_repository") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.lexicon = load_lexicon(os.path.join(model_dir, "lexicon.tsv"))
        self.pipeline = None
        hf_dir = config.get("parameters", {}).get("hf_model_dir", {}).get("string_value", "")
        if hf_dir and hf_pipeline is not None and os.path.isdir(hf_dir):
            # A local directory: transformers loads it without going online.
            self.pipeline = hf_pipeline("sentiment-analysis", model=hf_dir, tokenizer=hf_dir)

    def execute(self, requests):
        texts = [pb_utils.get_input_tensor_by_name(r, "TEXT").as_numpy() for r in requests]
        sizes = [t.size for t in texts]
        flat = np.concatenate([t.reshape(-1) for t in texts]) if texts else np.empty(0, dtype=object)
        scores = np.empty(flat.size, dtype=np.float32)
        decoded = [t.decode("utf-8", "replace") if isinstance(t, bytes) else str(t) for t in flat]
        if self.pipeline is not None:
            self.score_pipeline(decoded, scores)
        else:
            self.score_lexicon(decoded, scores)
        parts = np.split(scores, np.cumsum(sizes)[:-1])
        return [
            pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("SCORE", part.reshape(t.shape))])
            for part, t in zip(parts, texts)
        ]

    def score_lexicon(self, texts, out):
        lexicon = self.lexicon
        for i, text in enumerate(texts):
            total = 0.0
            sign = 1.0
            boost = 1.0
            for token in WORD.findall(text.lower()):
                if token in NEGATORS:
                    sign = -1.0
                    continue
                if token in INTENSIFIERS:
                    boost = 2.0
                    continue
                weight = lexicon.get(token)
                if weight is not None:
                    total += sign * boost * weight
                sign = 1.0
                boost = 1.0
            out[i] = total
        np.tanh(out / SCALE, out=out)
        out += 1.0
        out *= 0.5

    def score_pipeline(self, texts, out):
        # One pipeline call for the whole batch. The pipeline gives the
        # probability of the label it chose: the positive-class probability is
        # that score for a positive label and 1 - score for a negative one.
        for i, result in enumerate(self.pipeline(texts, batch_size=max(1, len(texts)))):
            score = float(result["score"])
            out[i] = score if result["label"].upper().startswith("POS") else 1.0 - score
