# preprocess: IMAGE uint8 [batch, H, W, 3] -> NORMALIZED fp32 [batch, 3, 224, 224].
#
# Bilinear resize (align-corners off, like most image libraries) and ImageNet
# mean/std normalization, vectorized over the whole batch of each request.
import numpy as np
import triton_python_backend_utils as pb_utils

SIZE = 224
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(1, 3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(1, 3, 1, 1)


def sample_points(source, target):
    """Source coordinates of each target pixel centre: lower index, upper index, weight."""
    position = (np.arange(target, dtype=np.float32) + 0.5) * (source / target) - 0.5
    position = np.clip(position, 0, source - 1)
    lower = np.floor(position).astype(np.int64)
    upper = np.minimum(lower + 1, source - 1)
    return lower, upper, (position - lower).astype(np.float32)


def resize_bilinear(images, size):
    """images: float32 [N, H, W, C] -> [N, size, size, C]."""
    _, height, width, _ = images.shape
    y0, y1, wy = sample_points(height, size)
    x0, x1, wx = sample_points(width, size)
    wy = wy.reshape(1, size, 1, 1)
    wx = wx.reshape(1, 1, size, 1)
    top = images[:, y0][:, :, x0] * (1 - wx) + images[:, y0][:, :, x1] * wx
    bottom = images[:, y1][:, :, x0] * (1 - wx) + images[:, y1][:, :, x1] * wx
    return top * (1 - wy) + bottom * wy


def preprocess(images):
    """uint8 [N, H, W, 3] -> float32 [N, 3, SIZE, SIZE]."""
    if images.shape[1] == 0 or images.shape[2] == 0:
        raise ValueError(f"image has no pixels (shape {list(images.shape[1:])})")
    resized = resize_bilinear(images.astype(np.float32) * (1.0 / 255.0), SIZE)
    chw = np.ascontiguousarray(resized.transpose(0, 3, 1, 2))
    chw -= MEAN
    chw /= STD
    return chw


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            images = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy()
            try:
                output = pb_utils.Tensor("NORMALIZED", preprocess(images))
                responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
            except ValueError as error:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(error))))
        return responses
