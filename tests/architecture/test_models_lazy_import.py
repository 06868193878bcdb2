"""Importing smug_opt.models, smug_opt.data or smug_opt.network imports no framework
(TensorFlow, Keras, PyTorch, ONNX)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("package", ["smug_opt.models", "smug_opt.data", "smug_opt.network"])
def test_import_does_not_load_tensorflow(package):
    code = (
        f"import sys, {package}\n"
        "heavy = sorted(m for m in ('tensorflow', 'keras', 'mlxtend', 'torch', 'onnx', 'onnxruntime')\n"
        "               if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
