"""Writing and reading a paper-scale problem as a ``.smug`` file."""

from __future__ import annotations

from smug_opt.ir import Problem


def test_save_paper_scale(benchmark, paper_problem, tmp_path):
    path = tmp_path / "paper.smug"
    benchmark(paper_problem.save, path)
    assert path.stat().st_size > 0


def test_load_paper_scale(benchmark, paper_problem, tmp_path):
    path = tmp_path / "paper.smug"
    paper_problem.save(path)
    loaded = benchmark(Problem.load, path)
    assert (loaded.A != paper_problem.A).nnz == 0
