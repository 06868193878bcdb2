"""Importing smug_opt.models, smug_opt.data or smug_opt.network imports no framework
(TensorFlow, Keras, PyTorch, ONNX)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _passes_in_a_fresh_interpreter(code: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("package", ["smug_opt.models", "smug_opt.data", "smug_opt.network"])
def test_import_does_not_load_tensorflow(package):
    code = (
        f"import sys, {package}\n"
        "heavy = sorted(m for m in ('tensorflow', 'keras', 'mlxtend', 'torch', 'onnx', 'onnxruntime')\n"
        "               if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    _passes_in_a_fresh_interpreter(code)


def test_safe_lp_bounds_do_not_import_the_network_layer():
    """Certification's LP bound (smug_opt.bounds.lp) on a problem without a network leaves
    smug_opt.network and the model zoo unimported (~0.15 s of CPU on a first certification)."""
    code = (
        "import sys, smug_opt.certify, smug_opt.safe_lp_bound, smug_opt.bounds.lp\n"
        "loaded = sorted(m for m in ('smug_opt.network', 'smug_opt.models', 'smug_opt.bounds.cells')\n"
        "                if m in sys.modules)\n"
        "assert not loaded, loaded\n"
        "from smug_opt.bounds import Box, propagate\n"
        "assert callable(propagate) and Box.__name__ == 'Box'\n"
    )
    _passes_in_a_fresh_interpreter(code)
