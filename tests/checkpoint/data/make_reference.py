"""Writes reference.safetensors with the reference safetensors implementation (the `safetensors`
package, 0.8.0, numpy API), for tests/checkpoint/safetensors_test.cpp. Run once; the output is
committed. The values are formulas the test recomputes on its own."""
import numpy as np
from safetensors.numpy import save_file

tensors = {
    "f32_2x3": (np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1).astype(np.float32),
    "f64_3x4x2": np.arange(24, dtype=np.float64).reshape(3, 4, 2) / 7,
    "f16_3": np.array([0.5, -2.0, 65504.0], dtype=np.float16),
    "i64_4": np.array([-3, 0, 7, 2**40], dtype=np.int64),
    "i32_2x2": np.array([[1, -2], [2**31 - 1, -(2**31)]], dtype=np.int32),
    "u8_5": (np.arange(5) * 50).astype(np.uint8),
    "bool_3": np.array([True, False, True]),
    "empty_0x3": np.zeros((0, 3), dtype=np.float32),
    "scalar": np.array(2.5, dtype=np.float32),
}
save_file(tensors, "reference.safetensors", metadata={"written_by": "safetensors 0.8.0"})
