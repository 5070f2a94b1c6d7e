#!/usr/bin/env python3
"""Writes the Flask-to-Triton article's model repository for real framework backends.

    /usr/bin/python3 examples/resnet50/make_models.py [--out DIR] [--models resnet50,mobilenet_v2]

Needs Debian's python3-torch, python3-torchvision and python3-pil (nothing is
downloaded: the weights are seeded, so classes are deterministic but
meaningless; the architecture and the compute are ResNet-50's). Writes into
DIR (default: examples/resnet50/model_repository, git-ignored):

  <model>/1/model.pt        TorchScript (torch.jit.trace), Triton's PyTorch backend
  <model>_onnx/1/model.onnx  ONNX (opset 17, dynamic batch), Triton's ONNX Runtime backend
  preprocess/                the colour demo's numpy preprocessing (Python backend)
  pipeline, pipeline_onnx    the article's ensemble: raw_image -> preprocess -> model
  reference/                 inputs and what torch in Python computes for them

Each model's config.pbtxt is the article's: max_batch_size 32, input__0 FP32
[3,224,224], output__0 FP32 [1000] with ImageNet's class names, two CPU
instances, dynamic batching (preferred 8/16/32, 500 us queue delay), the
response cache, and a warmup request with a real image.
"""
import argparse
import json
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import torch
import torchvision
from PIL import Image

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent
PREPROCESS_SOURCE = EXAMPLES / "model_repository" / "preprocess" / "1" / "model.py"
IMAGES = [EXAMPLES / "images" / "orange.jpg", EXAMPLES / "images" / "sky.jpg"]
SEED = 20260
ARCHITECTURES = {
    "resnet50": (torchvision.models.resnet50, torchvision.models.ResNet50_Weights),
    "mobilenet_v2": (torchvision.models.mobilenet_v2, torchvision.models.MobileNet_V2_Weights),
}


def load_preprocess():
    """The Python backend's preprocess(), imported outside Triton (its utils module stubbed)."""
    sys.modules.setdefault("triton_python_backend_utils", types.ModuleType("triton_python_backend_utils"))
    namespace = {}
    exec(compile(PREPROCESS_SOURCE.read_text(), str(PREPROCESS_SOURCE), "exec"), namespace)
    return namespace["preprocess"]


def model_config(name, platform, labels=True):
    label = '\n    label_filename: "labels.txt"' if labels else ""
    return f"""# {name}: the Flask-to-Triton article's classifier config, on CPU instances.
name: "{name}"
platform: "{platform}"
max_batch_size: 32
input [
  {{
    name: "input__0"
    data_type: TYPE_FP32
    dims: [ 3, 224, 224 ]
  }}
]
output [
  {{
    name: "output__0"
    data_type: TYPE_FP32
    dims: [ 1000 ]{label}
  }}
]
instance_group [
  {{
    count: 2
    kind: KIND_CPU
  }}
]
dynamic_batching {{
  preferred_batch_size: [ 8, 16, 32 ]
  max_queue_delay_microseconds: 500
}}
response_cache {{
  enable: true
}}
model_warmup [
  {{
    name: "orange"
    batch_size: 1
    inputs {{
      key: "input__0"
      value {{
        data_type: TYPE_FP32
        dims: [ 3, 224, 224 ]
        input_data_file: "input__0"
      }}
    }}
  }}
]
"""


PREPROCESS_CONFIG = """# The colour demo's preprocessing (examples/model_repository/preprocess):
# an RGB image of any size, HWC uint8, to a normalized CHW tensor of 224x224.
name: "preprocess"
backend: "python"
max_batch_size: 8
input [
  {
    name: "IMAGE"
    data_type: TYPE_UINT8
    dims: [ -1, -1, 3 ]
  }
]
output [
  {
    name: "NORMALIZED"
    data_type: TYPE_FP32
    dims: [ 3, 224, 224 ]
  }
]
dynamic_batching { }
instance_group [
  {
    count: 1
    kind: KIND_CPU
  }
]
"""


def pipeline_config(name, classifier):
    return f"""# The article's ensemble: a decoded image in, ImageNet scores out; the
# normalized tensor between the steps never leaves Triton.
name: "{name}"
platform: "ensemble"
max_batch_size: 8
input [
  {{
    name: "raw_image"
    data_type: TYPE_UINT8
    dims: [ -1, -1, 3 ]
  }}
]
output [
  {{
    name: "classification_result"
    data_type: TYPE_FP32
    dims: [ 1000 ]
  }}
]
ensemble_scheduling {{
  step [
    {{
      model_name: "preprocess"
      model_version: -1
      input_map {{
        key: "IMAGE"
        value: "raw_image"
      }}
      output_map {{
        key: "NORMALIZED"
        value: "processed_tensor"
      }}
    }},
    {{
      model_name: "{classifier}"
      model_version: -1
      input_map {{
        key: "input__0"
        value: "processed_tensor"
      }}
      output_map {{
        key: "output__0"
        value: "classification_result"
      }}
    }}
  ]
}}
"""


def write_model(out, name, platform, filename, save, labels, warmup):
    model_dir = out / name
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    (model_dir / "warmup").mkdir(exist_ok=True)
    save(model_dir / "1" / filename)
    (model_dir / "config.pbtxt").write_text(model_config(name, platform))
    (model_dir / "labels.txt").write_text("\n".join(labels) + "\n")
    (model_dir / "warmup" / "input__0").write_bytes(warmup.astype("<f4").tobytes())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / "model_repository")
    parser.add_argument("--models", default="resnet50,mobilenet_v2")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    preprocess = load_preprocess()
    images = [np.asarray(Image.open(path).convert("RGB")) for path in IMAGES]
    inputs = np.concatenate([preprocess(image[None]) for image in images])  # [2, 3, 224, 224]
    reference = out / "reference"
    reference.mkdir(exist_ok=True)
    summary = {"images": [], "models": {}}
    for path, image in zip(IMAGES, images):
        raw = reference / f"{path.stem}.rgb"
        raw.write_bytes(np.ascontiguousarray(image).tobytes())
        summary["images"].append({"name": path.stem, "file": raw.name, "shape": list(image.shape)})
    (reference / "inputs.f32").write_bytes(inputs.astype("<f4").tobytes())

    for arch in args.models.split(","):
        build, weights = ARCHITECTURES[arch]
        torch.manual_seed(SEED)
        model = build(weights=None).eval()
        labels = weights.IMAGENET1K_V1.meta["categories"]
        example = torch.from_numpy(inputs[:1])
        with torch.no_grad():
            expected = model(torch.from_numpy(inputs)).numpy()
            traced = torch.jit.trace(model, example)

        def save_onnx(path, model=model, example=example):
            torch.onnx.export(
                model, example, str(path), input_names=["input__0"], output_names=["output__0"],
                dynamic_axes={"input__0": {0: "batch"}, "output__0": {0: "batch"}}, opset_version=17,
            )

        write_model(out, arch, "pytorch_libtorch", "model.pt", lambda path, t=traced: t.save(str(path)), labels, inputs[0])
        write_model(out, f"{arch}_onnx", "onnxruntime_onnx", "model.onnx", save_onnx, labels, inputs[0])
        (reference / f"{arch}.f32").write_bytes(expected.astype("<f4").tobytes())
        summary["models"][arch] = {
            "output": f"{arch}.f32",
            "top5": [[int(i) for i in np.argsort(-row, kind="stable")[:5]] for row in expected],
        }
        print(f"{arch}: {out / arch} and {out / (arch + '_onnx')}", flush=True)

    (out / "preprocess" / "1").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PREPROCESS_SOURCE, out / "preprocess" / "1" / "model.py")
    (out / "preprocess" / "config.pbtxt").write_text(PREPROCESS_CONFIG)
    if "resnet50" in args.models.split(","):
        for name, classifier in [("pipeline", "resnet50"), ("pipeline_onnx", "resnet50_onnx")]:
            (out / name / "1").mkdir(parents=True, exist_ok=True)
            (out / name / "config.pbtxt").write_text(pipeline_config(name, classifier))
    summary["torch"] = torch.__version__
    (reference / "reference.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"reference outputs: {reference}")


if __name__ == "__main__":
    main()
