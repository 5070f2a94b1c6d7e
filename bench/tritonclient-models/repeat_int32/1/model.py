# repeat_int32 as tritonclient's examples use it: streams IN back one
# element per response through the request's response sender.
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().reshape(-1)
            delays = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy().reshape(-1)
            wait = pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy().reshape(-1)
            for index, value in enumerate(values):
                if len(delays) > 0:
                    time.sleep(float(delays[index % len(delays)]) / 1000.0)
                outputs = [
                    pb_utils.Tensor("OUT", np.array([value], dtype=np.int32)),
                    pb_utils.Tensor("IDX", np.array([index], dtype=np.uint32)),
                ]
                sender.send(pb_utils.InferenceResponse(output_tensors=outputs))
            if len(wait) > 0:
                time.sleep(float(wait[0]) / 1000.0)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
