# slow: OUTPUT0 = INPUT0 after sleeping DELAY_MS milliseconds in ~5 ms
# steps. A cancelled request gets a CANCELLED error "request cancelled".
import time

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
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY_MS").as_numpy()
            if wait_unless_cancelled(request, int(delay.reshape(-1)[0])):
                output = pb_utils.Tensor("OUTPUT0", data)
                responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
            else:
                error = pb_utils.TritonError(
                    "request cancelled", pb_utils.TritonError.CANCELLED
                )
                responses.append(pb_utils.InferenceResponse(error=error))
        return responses
