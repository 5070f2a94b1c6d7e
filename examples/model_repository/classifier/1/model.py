# classifier: INPUT fp32 [batch, 3, 224, 224] -> PROBABILITIES fp32 [batch, 12].
#
# One linear layer over each image's mean colour, then a softmax. All the
# requests of an execute() call are stacked and run as one matrix product.
import os

import numpy as np
import triton_python_backend_utils as pb_utils


def softmax(logits):
    logits = logits - logits.max(axis=1, keepdims=True)
    np.exp(logits, out=logits)
    logits /= logits.sum(axis=1, keepdims=True)
    return logits


class TritonPythonModel:
    def initialize(self, args):
        if args.get("model_repository") and args.get("model_version"):
            here = os.path.join(args["model_repository"], args["model_version"])
        else:
            here = os.path.dirname(os.path.abspath(__file__))
        matrix = np.load(os.path.join(here, "weights.npy"))
        self.weights = matrix[:3]  # [3, labels]
        self.bias = matrix[3]  # [labels]

    def execute(self, requests):
        inputs = [pb_utils.get_input_tensor_by_name(r, "INPUT").as_numpy() for r in requests]
        batch = np.concatenate(inputs) if len(inputs) > 1 else inputs[0]
        features = batch.mean(axis=(2, 3), dtype=np.float32)  # [N, 3]
        probabilities = softmax(features @ self.weights + self.bias).astype(np.float32)
        parts = np.split(probabilities, np.cumsum([len(x) for x in inputs])[:-1])
        return [
            pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("PROBABILITIES", part)])
            for part in parts
        ]
