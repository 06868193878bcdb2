"""Loading image folders and ground-truth box CSVs, with clear errors for bad files."""

import numpy as np
import pytest
from PIL import Image

from smug_opt.evaluate.boxes import Box
from smug_opt.evaluate.loaders import align_boxes, load_boxes_csv, load_image_folder


def test_load_image_folder_reads_png_jpeg_and_npy_sorted_by_name(tmp_path):
    gray = np.arange(28 * 28, dtype=np.uint8).reshape(28, 28)
    Image.fromarray(gray).save(tmp_path / "b.png")
    np.save(tmp_path / "a.npy", gray.astype(np.float32) / 255)
    Image.fromarray(gray).save(tmp_path / "c.jpg", quality=100)
    (tmp_path / "notes.txt").write_text("ignored")
    images, names = load_image_folder(tmp_path)
    assert names == ["a", "b", "c"]
    assert images.shape == (3, 28, 28, 1) and images.dtype == np.float32
    np.testing.assert_array_equal(images[1, :, :, 0], gray)  # PNG keeps 0-255 values
    np.testing.assert_allclose(images[0, :, :, 0], gray / 255, rtol=1e-6)


def test_load_image_folder_resizes_colour_images(tmp_path):
    Image.fromarray(np.zeros((40, 30, 4), np.uint8), "RGBA").save(tmp_path / "x.png")
    Image.fromarray(np.full((10, 10, 3), 9, np.uint8)).save(tmp_path / "y.png")
    images, _ = load_image_folder(tmp_path, size=(20, 24))
    assert images.shape == (2, 20, 24, 3)
    np.testing.assert_allclose(images[1], 9.0)


def test_load_image_folder_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="no .png"):
        load_image_folder(tmp_path)
    with pytest.raises(ValueError, match="not a directory"):
        load_image_folder(tmp_path / "missing")
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(tmp_path / "a.png")
    Image.fromarray(np.zeros((9, 8), np.uint8)).save(tmp_path / "b.png")
    with pytest.raises(ValueError, match=r"differ in shape.*b\.png: \(9, 8, 1\)"):
        load_image_folder(tmp_path)
    (tmp_path / "c.png").write_bytes(b"not a png")
    with pytest.raises(ValueError, match=r"cannot read .*c\.png as an image"):
        load_image_folder(tmp_path, size=(8, 8))


def test_load_boxes_csv_and_align(tmp_path):
    path = tmp_path / "boxes.csv"
    path.write_text("name,top,left,bottom,right\ncat,1,2,10,12\ndog,0,0,5,5\n")
    boxes = load_boxes_csv(path)
    assert boxes == {"cat": Box(1, 2, 10, 12), "dog": Box(0, 0, 5, 5)}
    assert align_boxes(["dog", "bird", "cat"], boxes) == [Box(0, 0, 5, 5), None, Box(1, 2, 10, 12)]
    with pytest.raises(ValueError, match="no box name matches"):
        align_boxes(["bird"], boxes)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name,top,left,bottom\ncat,1,2,3\n", r"missing \['right'\]"),
        ("name,top,left,bottom,right\ncat,1,2,x,4\n", r":2: top,left,bottom,right must be integers"),
        ("name,top,left,bottom,right\ncat,1,2,3,4\ncat,1,2,3,4\n", "appears twice"),
        ("name,top,left,bottom,right\ncat,5,2,3,4\n", "empty or negative"),
        ("name,top,left,bottom,right\n", "no box rows"),
    ],
)
def test_load_boxes_csv_errors_name_the_line_and_problem(tmp_path, text, message):
    path = tmp_path / "boxes.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_boxes_csv(path)


def test_load_boxes_csv_missing_file(tmp_path):
    with pytest.raises(ValueError, match="cannot read boxes CSV"):
        load_boxes_csv(tmp_path / "nope.csv")
