"""The test core's own implementation of Triton's documented python-backend API.

Models import it as ``import triton_python_backend_utils as pb_utils``, exactly
as in real Triton. It is written from the python backend's documentation (the
names, arguments and constants models use), not from NVIDIA's module. Data
moves through numpy: BYTES tensors are numpy object arrays of ``bytes``, like
in real Triton. The request, response sender and logger talk to the test core
through the built-in ``_testcore_native`` module.
"""

import json
import sys

import numpy as np

import _testcore_native

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

# Triton protocol datatype names <-> numpy dtypes. BF16 has no numpy type.
_NUMPY_OF = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}


def triton_to_numpy_type(data_type):
    """numpy dtype of a protocol datatype name ("FP32") or config name ("TYPE_FP32")."""
    name = data_type[5:] if data_type.startswith("TYPE_") else data_type
    if name == "STRING":
        name = "BYTES"
    return _NUMPY_OF.get(name)


def triton_string_to_numpy(triton_type_string):
    """numpy dtype of a config datatype name such as "TYPE_FP32"."""
    return triton_to_numpy_type(triton_type_string)


def numpy_to_triton_type(data_type):
    """Protocol datatype name of a numpy dtype ("FP32"), None if it has none."""
    dtype = np.dtype(data_type)
    if dtype.kind in ("O", "S", "U"):
        return "BYTES"
    for name, np_type in _NUMPY_OF.items():
        if name != "BYTES" and np.dtype(np_type) == dtype:
            return name
    return None


def serialize_byte_tensor(input_tensor):
    """numpy array of bytes/str -> uint8 array in Triton's 4-byte length-prefixed form."""
    if input_tensor.size == 0:
        return np.empty([0], dtype=np.uint8)
    chunks = []
    for item in np.asarray(input_tensor).reshape(-1, order="C"):
        if isinstance(item, str):
            item = item.encode("utf-8")
        elif not isinstance(item, (bytes, bytearray)):
            item = str(item).encode("utf-8")
        chunks.append(len(item).to_bytes(4, "little"))
        chunks.append(bytes(item))
    return np.frombuffer(b"".join(chunks), dtype=np.uint8)


def deserialize_bytes_tensor(encoded_tensor):
    """Triton's length-prefixed BYTES -> 1-D numpy object array of bytes."""
    data = bytes(encoded_tensor)
    items = []
    offset = 0
    while offset + 4 <= len(data):
        length = int.from_bytes(data[offset : offset + 4], "little")
        offset += 4
        items.append(data[offset : offset + length])
        offset += length
    result = np.empty(len(items), dtype=np.object_)
    result[:] = items
    return result


class TritonError(Exception):
    """An error a model reports; the client sees its message and code."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, message, code=INTERNAL):
        super().__init__(message)
        self._message = message
        self._code = code

    def message(self):
        return self._message

    def code(self):
        return self._code


class TritonModelException(Exception):
    """Raised by the API on misuse (the python backend's own exception type)."""


class Tensor:
    """A named tensor holding a numpy array."""

    def __init__(self, name, data, dtype=None):
        if not isinstance(name, str):
            raise TritonModelException("Tensor name must be a string")
        array = np.asarray(data)
        if dtype is not None:
            array = array.astype(dtype)
        if numpy_to_triton_type(array.dtype) is None:
            raise TritonModelException(
                "Tensor '" + name + "' has a numpy dtype Triton cannot carry: " + str(array.dtype)
            )
        self._name = name
        self._array = array

    def name(self):
        return self._name

    def as_numpy(self):
        return self._array

    def triton_dtype(self):
        return numpy_to_triton_type(self._array.dtype)

    def shape(self):
        return list(self._array.shape)

    def is_cpu(self):
        return True

    @classmethod
    def from_dlpack(cls, name, capsule):
        return cls(name, np.from_dlpack(capsule))


class InferenceResponse:
    """The outputs of one request, or an error."""

    def __init__(self, output_tensors=None, error=None, parameters=None):
        self._outputs = list(output_tensors or [])
        if error is not None and not isinstance(error, TritonError):
            error = TritonError(str(error))
        self._error = error
        if parameters is None:
            parameters = {}
        self._parameters = parameters if isinstance(parameters, str) else json.dumps(parameters)

    def output_tensors(self):
        return self._outputs

    def has_error(self):
        return self._error is not None

    def error(self):
        return self._error

    def parameters(self):
        return self._parameters


class InferenceResponseSender:
    """Sends the responses of one request of a decoupled model."""

    def __init__(self, handle):
        self._handle = handle

    def send(self, response=None, flags=0):
        if response is not None and not isinstance(response, InferenceResponse):
            raise TritonModelException("send() takes an InferenceResponse or None")
        outcome = None if response is None else _outcome(response)
        refused = _testcore_native.send(self._handle, outcome, int(flags))
        if refused is not None:
            raise TritonModelException(refused)

    def is_cancelled(self):
        return _testcore_native.is_cancelled(self._handle)


class InferenceRequest:
    """One request of the batch passed to execute()."""

    def __init__(self, handle, model_name, request_id, correlation_id, flags, parameters, requested, inputs, timeout):
        self._handle = handle
        self._model_name = model_name
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._flags = flags
        self._parameters = parameters
        self._requested = requested
        self._inputs = inputs
        self._timeout = timeout

    def inputs(self):
        return self._inputs

    def request_id(self):
        return self._request_id

    def correlation_id(self):
        return self._correlation_id

    def flags(self):
        return self._flags

    def parameters(self):
        return self._parameters

    def requested_output_names(self):
        return list(self._requested)

    def model_name(self):
        return self._model_name

    def timeout(self):
        return self._timeout

    def get_response_sender(self):
        return InferenceResponseSender(self._handle)

    def is_cancelled(self):
        return _testcore_native.is_cancelled(self._handle)


def get_input_tensor_by_name(inference_request, name):
    """The request's input tensor called name, or None."""
    for tensor in inference_request.inputs():
        if tensor.name() == name:
            return tensor
    return None


def get_output_tensor_by_name(inference_response, name):
    """The response's output tensor called name, or None."""
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


def get_input_config_by_name(model_config, name):
    """The input section of a model configuration dict, or None."""
    for item in model_config.get("input", []):
        if item.get("name") == name:
            return item
    return None


def get_output_config_by_name(model_config, name):
    """The output section of a model configuration dict, or None."""
    for item in model_config.get("output", []):
        if item.get("name") == name:
            return item
    return None


class ModelConfig:
    """The configuration handed to auto_complete_config()."""

    def __init__(self, model_config):
        self._config = model_config

    def as_dict(self):
        return self._config

    def max_batch_size(self):
        return int(self._config.get("max_batch_size", 0))

    def set_max_batch_size(self, max_batch_size):
        self._config["max_batch_size"] = int(max_batch_size)

    def set_dynamic_batching(self):
        self._config.setdefault("dynamic_batching", {})

    def set_model_transaction_policy(self, transaction_policy_dict):
        policy = self._config.setdefault("model_transaction_policy", {})
        for key, value in transaction_policy_dict.items():
            if key != "decoupled":
                raise ValueError("model transaction property '" + key + "' is not supported")
            policy[key] = bool(value)

    def _add(self, section, tensor):
        for key in ("name", "data_type", "dims"):
            if key not in tensor:
                raise ValueError(section + " '" + str(tensor.get("name")) + "' is missing '" + key + "'")
        for existing in self._config.setdefault(section, []):
            if existing.get("name") != tensor["name"]:
                continue
            for key, value in tensor.items():
                have = existing.get(key)
                if key == "dims" and have is not None:
                    have = [int(d) for d in have]
                    value = [int(d) for d in value]
                if have not in (None, [], "") and have != value:
                    raise ValueError(
                        "model configuration specified " + section + " '" + tensor["name"] + "' with a different '" + key + "'"
                    )
                existing[key] = value
            return
        self._config[section].append(dict(tensor))

    def add_input(self, input):
        self._add("input", input)

    def add_output(self, output):
        self._add("output", output)

    def add_batch_input(self, batch_input):
        self._config.setdefault("batch_input", []).append(dict(batch_input))

    def add_batch_output(self, batch_output):
        self._config.setdefault("batch_output", []).append(dict(batch_output))


class Logger:
    """Writes into the server's log (the test core's logger)."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3

    @staticmethod
    def log(message, level=0):
        _log(message, level)

    @staticmethod
    def log_info(message):
        _log(message, Logger.INFO)

    @staticmethod
    def log_warn(message):
        _log(message, Logger.WARNING)

    @staticmethod
    def log_error(message):
        _log(message, Logger.ERROR)

    @staticmethod
    def log_verbose(message):
        _log(message, Logger.VERBOSE)


def _log(message, level):
    # Frame 0 is _log, 1 the Logger method, 2 the model code that logged.
    frame = sys._getframe(2)
    _testcore_native.log(int(level), str(message), frame.f_code.co_filename, frame.f_lineno)


class LogLevel:
    INFO = Logger.INFO
    WARNING = Logger.WARNING
    ERROR = Logger.ERROR
    VERBOSE = Logger.VERBOSE


def _outcome(response):
    """A response as the test core reads it: (code or -1, message, outputs, parameters)."""
    if response.has_error():
        return (int(response.error().code()), str(response.error().message()), [], [])
    outputs = []
    for tensor in response.output_tensors():
        array = tensor.as_numpy()
        dtype = numpy_to_triton_type(array.dtype)
        if dtype == "BYTES":
            data = serialize_byte_tensor(array).tobytes()
        else:
            data = np.ascontiguousarray(array).tobytes()
        outputs.append((tensor.name(), dtype, [int(d) for d in array.shape], data))
    return (-1, "", outputs, list(json.loads(response._parameters).items()))
