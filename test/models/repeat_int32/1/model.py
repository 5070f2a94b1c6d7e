# repeat_int32 (decoupled): one response per element of IN, in order, each
# carrying that element as OUT [1]; then the FINAL flag without a response.
# Optional DELAY_MS waits before each response. When the request is
# cancelled it stops and sends a CANCELLED error ("request cancelled") as the
# final response.
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
            self.repeat(request)
        return None

    def repeat(self, request):
        sender = request.get_response_sender()
        values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
        delay = pb_utils.get_input_tensor_by_name(request, "DELAY_MS")
        delay_ms = int(delay.as_numpy().reshape(-1)[0]) if delay is not None else 0
        for value in values.reshape(-1):
            if not wait_unless_cancelled(request, delay_ms):
                error = pb_utils.TritonError(
                    "request cancelled", pb_utils.TritonError.CANCELLED
                )
                sender.send(
                    pb_utils.InferenceResponse(error=error),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                return
            out = pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))
            sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
