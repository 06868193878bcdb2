"""Evaluation of saliency maps (SMUG paper, sec. 4): LSC, Win%, sparsity, deletion/insertion,
ROAD, baselines, reports.

Importing this package loads neither TensorFlow nor matplotlib; they are imported by the
functions that need them.
"""

from smug_opt.evaluate.aggregates import (
    Estimate,
    PrecisionRecall,
    Quartiles,
    lsc_quartiles,
    mean_estimate,
    sparsity,
    token_precision_recall,
    wilson_interval,
    win_rates,
)
from smug_opt.evaluate.baselines import (
    grad_cam,
    last_conv_layer,
    pixel_integrated_gradients,
    token_integrated_gradients,
)
from smug_opt.evaluate.boxes import (
    Box,
    center_box,
    crop_and_resize,
    grid_boxes,
    ground_truth_box,
    max_box,
    tightest_box,
)
from smug_opt.evaluate.evaluation import evaluate
from smug_opt.evaluate.faithfulness import Curve, deletion_curve, insertion_curve
from smug_opt.evaluate.loaders import align_boxes, load_boxes_csv, load_image_folder
from smug_opt.evaluate.lsc import (
    AREA_FLOOR,
    LSCResult,
    box_lsc,
    lsc_score,
    lsc_value,
    opt_box,
    score_boxes,
    sweep_thresholds,
)
from smug_opt.evaluate.methods import METHODS, Method
from smug_opt.evaluate.report import plot_examples, table_json, table_markdown
from smug_opt.evaluate.results import EvaluationResult, MethodOutcome, MethodSummary
from smug_opt.evaluate.road import ROAD_LEVELS, RoadResult, noisy_linear_imputation, road
from smug_opt.evaluate.scoring import summarize
from smug_opt.evaluate.sis import sufficient_input_subset

__all__ = [
    "AREA_FLOOR",
    "METHODS",
    "ROAD_LEVELS",
    "Box",
    "Curve",
    "Estimate",
    "EvaluationResult",
    "LSCResult",
    "Method",
    "MethodOutcome",
    "MethodSummary",
    "PrecisionRecall",
    "Quartiles",
    "RoadResult",
    "align_boxes",
    "box_lsc",
    "center_box",
    "crop_and_resize",
    "deletion_curve",
    "evaluate",
    "grad_cam",
    "grid_boxes",
    "ground_truth_box",
    "insertion_curve",
    "last_conv_layer",
    "load_boxes_csv",
    "load_image_folder",
    "lsc_quartiles",
    "lsc_score",
    "lsc_value",
    "max_box",
    "mean_estimate",
    "noisy_linear_imputation",
    "opt_box",
    "pixel_integrated_gradients",
    "plot_examples",
    "road",
    "score_boxes",
    "sparsity",
    "sufficient_input_subset",
    "summarize",
    "sweep_thresholds",
    "table_json",
    "table_markdown",
    "tightest_box",
    "token_integrated_gradients",
    "token_precision_recall",
    "wilson_interval",
    "win_rates",
]
