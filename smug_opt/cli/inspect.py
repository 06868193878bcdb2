"""``smug-opt inspect MODEL``: the network as smug-opt reads it, and its flat form."""

from __future__ import annotations

import argparse

from smug_opt.cli.options import add_model_input_options, input_range_arg, input_shape_arg

__all__ = ["add_parser", "describe_network", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "inspect", help="print a model as smug-opt reads it (nodes, shapes, flat layers)",
        description="Read a model (.onnx, .pt2, .keras/.h5, package.module:factory or an embedded "
                    "name) and print every node with its operation, output shape and parameter count, "
                    "then the flat form bounds and encoders work on.")
    p.add_argument("model", help="the model: a file, package.module:factory, or an embedded model's name")
    add_model_input_options(p.add_argument_group("what the file does not say"))
    return p


def describe_network(network, pre, flat) -> list[str]:
    """The lines ``smug-opt inspect`` prints for a read network and its lowered form."""
    from smug_opt.network.graph import parameter_count

    lines = [f"network {network.name}  (digest {network.digest[:12]})",
             f"input  shape {network.input_shape}, layout {network.source_layout}, range "
             f"{'undeclared' if network.input_range is None else network.input_range}",
             f"output {network.num_outputs} class scores ({network.output})", ""]
    rows = [("#", "node", "op", "inputs", "shape", "params")]
    for index, node in enumerate(network.nodes):
        rows.append((str(index), node.name, type(node.op).__name__, ",".join(map(str, node.inputs)) or "-",
                     "x".join(map(str, node.shape)), str(parameter_count(node.op))))
    total = sum(parameter_count(node.op) for node in network.nodes)
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
              for row in rows]
    lines += [f"{total} parameters", "",
              f"flat form: affine input {flat.num_inputs} values {flat.input_shape} (preprocessing: "
              f"{_preprocessing(pre)}), {len(flat.layers) - 1} layers"]
    for index, layer in enumerate(flat.layers[1:], start=1):
        nnz = f", {layer.matrix.nnz} nonzeros" if layer.matrix is not None else ""
        lines.append(f"  {index:>3} {layer.kind:<10} {layer.size:>7}  from {layer.inputs}{nnz}  {layer.name}")
    return lines


def _preprocessing(pre) -> str:
    import numpy as np

    moves = not np.array_equal(pre.index, np.arange(len(pre.index)))
    scales = not (np.all(pre.scale == 1) and np.all(pre.shift == 0))
    return {(False, False): "none", (True, False): "reorders the input", (False, True): "scales the input",
            (True, True): "reorders and scales the input"}[moves, scales]


def run(args: argparse.Namespace) -> int:
    from smug_opt.models.resolve import ModelOptions, read_network
    from smug_opt.network.load import model_spec_kind
    from smug_opt.network.lower import lower

    model_spec_kind(args.model)  # a bad name fails before any framework loads
    options = ModelOptions(input_shape_arg(args.input_shape), args.input_layout,
                           input_range_arg(args.input_range))
    network = read_network(args.model, options)
    pre, flat = lower(network)
    print("\n".join(describe_network(network, pre, flat)))
    return 0
