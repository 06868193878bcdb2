"""Reading files within a budget: every size a file declares is checked before anything
is allocated or decompressed, so a small hostile file cannot take gigabytes.

Loading runs in the caller's process, outside any worker's memory budget: a 1.5 MB
``.smug`` whose member inflates to 1.6 GB, or an ``.npy`` header claiming 10^10 elements,
must be refused from its declarations alone. The budget is :func:`read_budget_bytes`
(``SMUG_OPT_READ_LIMIT_MB``, default 1024 MB); each refusal is one ``ValueError`` naming
the file and what is wrong with it.
"""

from __future__ import annotations

import contextlib
import math
import os
import tokenize
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

__all__ = ["READ_LIMIT_ENV", "check_npy_file", "open_image", "read_budget_bytes", "read_npz"]

READ_LIMIT_ENV = "SMUG_OPT_READ_LIMIT_MB"
_DEFAULT_LIMIT_MB = 1024


def read_budget_bytes() -> int:
    """The most bytes one file may decompress to (``SMUG_OPT_READ_LIMIT_MB``, default 1024)."""
    text = os.environ.get(READ_LIMIT_ENV)
    if text is None:
        return _DEFAULT_LIMIT_MB * 2**20
    try:
        mb = float(text)
    except ValueError:
        mb = math.nan
    if not mb > 0:
        raise ValueError(f"{READ_LIMIT_ENV} must be positive megabytes, got {text!r}")
    return int(mb * 2**20)


def _over(path: Path, what: str, nbytes: int) -> ValueError:
    return ValueError(f"{path}: {what} would take {nbytes / 2**20:,.0f} MB, over the reading "
                      f"budget of {read_budget_bytes() / 2**20:,.0f} MB (raise {READ_LIMIT_ENV} "
                      "if the file is genuine)")


def _npy_header(path: Path, member: str, handle: IO[bytes]) -> tuple[tuple[int, ...], np.dtype, int]:
    """Shape, dtype and data size an ``.npy`` stream declares (its header alone is read)."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(handle)
        reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = reader(handle)
    except (ValueError, OSError, EOFError, SyntaxError, TypeError, tokenize.TokenError) as exc:
        # numpy parses the header's dict literal with tokenize and ast: a damaged one fails there
        raise ValueError(f"{path}: {member} is not a valid .npy array ({exc})") from None
    if dtype.hasobject:
        raise ValueError(f"{path}: {member} holds Python objects, which are never loaded")
    return shape, dtype, math.prod(shape) * dtype.itemsize


def check_npy_file(path: str | os.PathLike[str], *, mapped: bool = False) -> tuple[int, ...]:
    """The shape of the ``.npy`` file ``path`` once its header is checked: data exactly as
    long as the file holds (not truncated, not padded) and, unless it is to be memory-mapped
    (``mapped``: pages are read as used, a batch's rows one chunk at a time), within the
    budget."""
    target = Path(path)
    with open(target, "rb") as handle:
        shape, _, nbytes = _npy_header(target, "the array", handle)
        held = target.stat().st_size - handle.tell()
    if nbytes > read_budget_bytes() and not mapped:
        raise _over(target, f"its header's {shape} array", nbytes)
    if nbytes != held:
        raise ValueError(f"{target}: its header declares a {shape} array of {nbytes:,} bytes but the "
                         f"file holds {held:,} (truncated or not an .npy file)")
    return shape


def read_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` archive ``path``, after checking the members' declared
    sizes (zip directory and ``.npy`` headers) against the budget and each other."""
    target = Path(path)
    try:
        archive = zipfile.ZipFile(target)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ValueError(f"{target} is not a zip archive ({exc or 'empty'})") from None
    except (NotImplementedError, RuntimeError) as exc:  # a zip feature numpy never writes
        raise ValueError(f"{target} is a zip archive this reader does not read ({exc})") from None
    with archive:
        infos = [i for i in archive.infolist() if not i.is_dir()]
        total = sum(i.file_size for i in infos)
        if total > read_budget_bytes():
            raise _over(target, "its members, decompressed,", total)
        arrays: dict[str, np.ndarray] = {}
        for info in infos:
            name = info.filename.removesuffix(".npy")
            try:
                with archive.open(info) as handle:
                    shape, _, nbytes = _npy_header(target, f"member {name}", handle)
                    if nbytes != info.file_size - handle.tell():
                        raise ValueError(f"{target}: member {name} declares a {shape} array of "
                                         f"{nbytes:,} bytes in {info.file_size:,} bytes")
                with archive.open(info) as handle:
                    arrays[name] = np.lib.format.read_array(handle, allow_pickle=False)
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError,
                    RuntimeError) as exc:  # the last two: encrypted or of an unknown compression
                raise ValueError(f"{target}: member {name} is damaged ({exc})") from None
        return arrays


@contextlib.contextmanager
def open_image(path: str | os.PathLike[str]) -> Iterator[Any]:
    """The PIL image at ``path``, opened lazily, once its declared size is checked: float64
    pixels within the budget, and under Pillow's own decompression-bomb limit (its warning,
    at half the limit, refuses too). Anything PIL cannot read is one ValueError."""
    import warnings

    from PIL import Image, UnidentifiedImageError

    target = Path(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(target) as opened:
                nbytes = opened.width * opened.height * len(opened.getbands()) * 8
                if nbytes > read_budget_bytes():
                    raise _over(target, f"its {opened.width}x{opened.height} pixels, as float64,", nbytes)
                yield opened
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ValueError(f"{target}: {exc}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, zlib.error) as exc:
        raise ValueError(f"cannot read {target} as an image ({exc})") from None
    except ValueError as exc:  # Pillow's own, on a damaged chunk; ours already name the file
        if str(target) in str(exc):
            raise
        raise ValueError(f"cannot read {target} as an image ({exc})") from None


def load_onnx(path: str | os.PathLike[str]) -> Any:
    """The ONNX model at ``path`` with its external data, once the file and the external
    tensors it declares (their ``length``, else their files' sizes) fit the budget."""
    import onnx
    from onnx import external_data_helper

    target = Path(path)
    size = target.stat().st_size
    if size > read_budget_bytes():
        raise _over(target, "the model file", size)
    try:
        model = onnx.load(str(target), load_external_data=False)
    except Exception as error:  # protobuf's DecodeError and friends
        raise ValueError(f"{target} is not an ONNX model: {error}") from None
    external = 0
    for tensor in external_data_helper._get_all_tensors(model):  # initializers and attributes
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        data_file = target.parent / info.get("location", "")
        if not data_file.is_file() or data_file.resolve().parent != target.parent.resolve():
            raise ValueError(f"{target}: tensor {tensor.name} names external data "
                             f"{info.get('location')!r}, which is not a file beside the model")
        declared = int(info.get("length", data_file.stat().st_size - int(info.get("offset", 0))))
        external += max(declared, 0)
    if size + external > read_budget_bytes():
        raise _over(target, "the model and its external data", size + external)
    try:
        onnx.load_external_data_for_model(model, str(target.parent))
    except (OSError, ValueError) as error:
        raise ValueError(f"{target}: its external data cannot be read ({error})") from None
    return model
