# fail: every request gets an error response "fail model always fails"
# (code INTERNAL).
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        error = pb_utils.TritonError("fail model always fails")
        return [pb_utils.InferenceResponse(error=error) for _ in requests]
