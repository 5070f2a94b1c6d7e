# word_stream: TEXT [1] -> one response per word (WORD [1], INDEX [1]), then
# the final flag without a response.
#
# Decoupled: responses go through the request's response sender, not the
# return value. Before each word it waits DELAY_MS (default 0) in small steps,
# checking is_cancelled(), so a client's abort or timeout stops the stream;
# a cancelled stream ends with a CANCELLED error ("request cancelled").
import time

import numpy as np
import triton_python_backend_utils as pb_utils

STEP_SECONDS = 0.005


def wait_unless_cancelled(request, delay_ms):
    """Sleeps delay_ms in small steps; False when the request got cancelled."""
    deadline = time.monotonic() + delay_ms / 1000.0
    while True:
        if request.is_cancelled():
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        time.sleep(min(left, STEP_SECONDS))


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            self.stream(request)
        return None

    def stream(self, request):
        sender = request.get_response_sender()
        text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)[0]
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        delay = pb_utils.get_input_tensor_by_name(request, "DELAY_MS")
        delay_ms = int(delay.as_numpy().reshape(-1)[0]) if delay is not None else 0
        for index, word in enumerate(str(text).split()):
            if not wait_unless_cancelled(request, delay_ms):
                error = pb_utils.TritonError("request cancelled", pb_utils.TritonError.CANCELLED)
                sender.send(
                    pb_utils.InferenceResponse(error=error),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                return
            sender.send(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("WORD", np.array([word.encode("utf-8")], dtype=np.object_)),
                        pb_utils.Tensor("INDEX", np.array([index], dtype=np.int32)),
                    ]
                )
            )
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
