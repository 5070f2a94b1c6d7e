# simple: element-wise sum and difference of two INT32 tensors.
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            outputs = [
                pb_utils.Tensor("OUTPUT0", (a + b).astype(a.dtype)),
                pb_utils.Tensor("OUTPUT1", (a - b).astype(a.dtype)),
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
