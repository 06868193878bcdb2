"""smug-opt: minimal-mask explanations of neural networks, on any exact solver.

``import smug_opt`` loads no solver and no TensorFlow: backends and model adapters are
imported when they are used.
"""

from smug_opt.backend import Backend, Capabilities, RawResult, SolveOptions, Status
from smug_opt.batch import explain_many
from smug_opt.explanation import Explanation, explain
from smug_opt.ir import Problem, ProblemBuilder, Sense, VarKind
from smug_opt.parameters import SmugParameters
from smug_opt.problem_file import load_problem, save_problem
from smug_opt.registry import available_backends, backend_infos
from smug_opt.result import SolveResult
from smug_opt.solving import solve
from smug_opt.verification import Verification, verify

__all__ = [
    "Backend",
    "Capabilities",
    "Explanation",
    "Problem",
    "ProblemBuilder",
    "RawResult",
    "Sense",
    "SmugParameters",
    "SolveOptions",
    "SolveResult",
    "Status",
    "VarKind",
    "Verification",
    "available_backends",
    "backend_infos",
    "explain",
    "explain_many",
    "load_problem",
    "save_problem",
    "solve",
    "verify",
]
__version__ = "0.1.0"
