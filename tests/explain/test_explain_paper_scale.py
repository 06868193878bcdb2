"""The explain pipeline at the paper's ImageNet scale: 224×224×3 input, Inception-v1's first
layer (Conv2D 64 filters 7×7, stride 2, 'same'), 4×4 cells (3,136 mask variables)."""

import numpy as np
import pytest

from smug_opt.bench.generators import paper_scale_model


@pytest.mark.parametrize("k", [pytest.param(500), pytest.param(3000, marks=pytest.mark.slow)])
def test_paper_scale_end_to_end(k):
    from smug_opt.explanation import explain

    model = paper_scale_model()
    x = np.random.default_rng(0).random((224, 224, 3))
    e = explain(model, x, k=k, cell=4, steps=8, backend="highs", time_limit=300)
    assert e.problem.num_vars == 56 * 56 and e.problem.num_rows == k
    assert e.result.status.name == "OPTIMAL" and e.result.verified
    assert e.mask.shape == (224, 224) and 0 < e.mask_size < 56 * 56
    base = explain(model, x, method="smug_base", k=k, cell=4, steps=8)
    assert e.mask_size <= base.mask_size
