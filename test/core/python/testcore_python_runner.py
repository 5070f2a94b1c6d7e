"""How the test core's python backend drives a model.py (not part of the pb_utils API).

The C++ side (test/core/python_backend.cc) calls these functions with the GIL
held and gets plain tuples back: (True, value) on success, (False, message)
when the model failed, the message formatted like the python backend's
("<Type>: <message>" then the traceback after "At:").
"""

import importlib.util
import json
import os
import sys
import traceback

import numpy as np

import triton_python_backend_utils as pb_utils


def _format_exception(exc):
    lines = [type(exc).__name__ + ": " + str(exc), "", "At:"]
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]
    for frame in reversed(frames):
        lines.append("  %s(%d): %s" % (frame.filename, frame.lineno, frame.name))
    return "\n".join(lines) + "\n"


def _import(path, module_name):
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    # Modules beside model.py can be imported while it loads.
    directory = os.path.dirname(path)
    sys.path.insert(0, directory)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    finally:
        try:
            sys.path.remove(directory)
        except ValueError:
            pass
    return module


def _model_class(module):
    cls = getattr(module, "TritonPythonModel", None)
    if cls is None:
        raise AttributeError("module '" + module.__file__ + "' has no attribute 'TritonPythonModel'")
    return cls


def load(path, module_name, instance_args):
    """Imports model.py once per instance and calls initialize(args) on each."""
    instances = []
    try:
        for index, args in enumerate(instance_args):
            name = "%s_%d" % (module_name, index)
            module = _import(path, name)
            instances.append((_model_class(module)(), name))
            model = instances[-1][0]
            if hasattr(model, "initialize"):
                model.initialize(dict(args))
        return (True, instances)
    except BaseException as exc:
        for _, name in instances:
            sys.modules.pop(name, None)
        return (False, _format_exception(exc))


def finalize(instance):
    model, name = instance
    try:
        if hasattr(model, "finalize"):
            model.finalize()
        return (True, None)
    except BaseException as exc:
        return (False, _format_exception(exc))
    finally:
        sys.modules.pop(name, None)


def auto_complete(path, module_name, config_json):
    """Runs TritonPythonModel.auto_complete_config; the new config as JSON, or None."""
    try:
        module = _import(path, module_name)
        try:
            complete = getattr(_model_class(module), "auto_complete_config", None)
            if complete is None:
                return (True, None)
            result = complete(pb_utils.ModelConfig(json.loads(config_json)))
            if not isinstance(result, pb_utils.ModelConfig):
                raise TypeError("auto_complete_config must return the ModelConfig it was given")
            return (True, json.dumps(result.as_dict()))
        finally:
            sys.modules.pop(module_name, None)
    except BaseException as exc:
        return (False, _format_exception(exc))


def _tensor(name, datatype, shape, data):
    if datatype == "BYTES":
        array = pb_utils.deserialize_bytes_tensor(data)
    elif datatype == "BF16":
        # numpy has no bfloat16: the bits as uint16.
        array = np.frombuffer(data, dtype=np.uint16)
    else:
        array = np.frombuffer(data, dtype=pb_utils.triton_to_numpy_type(datatype))
    return pb_utils.Tensor(name, array.reshape(shape))


def execute(instance, model_name, raw_requests, decoupled):
    """Runs execute(requests); for a non-decoupled model, one outcome per request."""
    model = instance[0]
    try:
        requests = []
        for handle, request_id, correlation_id, flags, parameters, requested, inputs, timeout in raw_requests:
            tensors = [_tensor(*item) for item in inputs]
            requests.append(
                pb_utils.InferenceRequest(
                    handle, model_name, request_id, correlation_id, flags, parameters, requested, tensors, timeout
                )
            )
        result = model.execute(requests)
    except BaseException as exc:
        return (False, _format_exception(exc))
    if decoupled:
        if result is not None:
            return (
                False,
                "Python model '" + model_name + "' is using the decoupled mode and the execute function must return None.",
            )
        return (True, None)
    if result is None:
        # The model answered through response senders.
        return (True, None)
    try:
        responses = list(result)
        if len(responses) != len(requests):
            return (
                False,
                "Number of InferenceResponse objects do not match the number of InferenceRequest objects. "
                "InferenceRequest(s) size is:%d, and InferenceResponse(s) size is:%d\n" % (len(requests), len(responses)),
            )
        outcomes = []
        for response in responses:
            if not isinstance(response, pb_utils.InferenceResponse):
                raise TypeError(
                    "Expected an 'InferenceResponse' object in the execute function return list, found type '"
                    + type(response).__name__
                    + "'."
                )
            outcomes.append(pb_utils._outcome(response))
        return (True, outcomes)
    except BaseException as exc:
        return (False, _format_exception(exc))
