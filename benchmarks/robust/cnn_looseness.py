"""How loose the bounds are on the CNNs with every pixel free (ε = 0.05, held-out digits 0–2):
per disjunct ``logit[label] − logit[j]``, the fixed-seed PGD re-check's smallest margin, CROWN on
the network (max pooling relaxed), α-CROWN on its last layer (:func:`alpha_lower`), CROWN and
α-CROWN on the max-pool rewrite that branch and bound splits, and per ReLU layer of the rewrite
its unstable neurons and the worst row's upper-chord intercepts (what its relaxation loses).

    nice -n 10 .venv/bin/python benchmarks/robust/cnn_looseness.py "verivital maxpool" 30
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from run import MODELS, images

from smug_opt.bounds.alpha_crown import optimise
from smug_opt.bounds.alpha_flat import alpha_lower
from smug_opt.models.network_stem import read_network_stem
from smug_opt.models.resolve import network_of
from smug_opt.network.lower import lower
from smug_opt.robustness import RobustnessQuery
from smug_opt.robustness.check import attack_check
from smug_opt.robustness.explanation import label_changes
from smug_opt.robustness.model_explanation import _network_input


def main(net_name: str, steps: int) -> None:
    network = network_of(MODELS[net_name], input_range=(0.0, 1.0))
    pre, flat = lower(network)
    for name, x, _ in images(0, 3):
        fx = _network_input(network, read_network_stem(network).input_view, x)
        label = int(flat.forward(pre(fx[None]))[-1][0].argmax())
        lo, hi = np.clip(fx - 0.05, 0, 1), np.clip(fx + 0.05, 0, 1)
        q = RobustnessQuery(flat, pre, lo, hi, label_changes(flat.num_outputs, label))
        rows = np.vstack([d.matrix for d in q.disjuncts])
        crown, _ = q.bounds.linear(rows)
        alpha = alpha_lower(q.bounds, rows, np.zeros(len(rows)), steps=steps)
        pgd = attack_check(flat, pre, fx, np.zeros(fx.size, bool), label, 0.05, (0.0, 1.0))
        t = time.process_time()
        chain = q.chain_bounds()
        assert chain is not None
        C, top = torch.from_numpy(rows), len(chain.chain.widths)
        alphas = [chain.initial_alpha(j, 1, len(rows)) for j in range(top)]
        root, coefficients = chain.lower(top, C, torch.zeros(len(rows)), alphas)
        optimised = optimise(chain, top, C, torch.zeros(len(rows)), steps=steps, alphas=alphas)
        intercepts = chain._chord[1]
        losses = [(int(chain.unstable(i).sum()),
                   round(float((coefficients[i][0].clamp(max=0) * intercepts[i]).sum(-1).min()), 2))
                  for i in range(top)]
        print(f"{net_name} {name}: PGD margin {pgd.to_dict()['smallest_margin']:.2f}, "
              f"CROWN {crown.min():.2f}, α-CROWN {alpha.min():.2f}; rewrite CROWN {float(root.min()):.2f}, "
              f"α-CROWN {float(optimised.bound.min()):.2f} ({time.process_time() - t:.1f} CPU s)", flush=True)
        print(f"  rewrite's ReLU layers {chain.chain.widths}: (unstable, lost) {losses}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30)
