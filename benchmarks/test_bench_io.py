"""Writing and reading a paper-scale problem as a ``.smug`` file."""

from __future__ import annotations

from smug_opt.problem_file import load_problem, save_problem


def test_save_paper_scale(benchmark, paper_problem, tmp_path):
    path = tmp_path / "paper.smug"
    benchmark(save_problem, paper_problem, path)
    assert path.stat().st_size > 0


def test_load_paper_scale(benchmark, paper_problem, tmp_path):
    path = tmp_path / "paper.smug"
    save_problem(paper_problem, path)
    loaded = benchmark(load_problem, path)
    assert (loaded.A != paper_problem.A).nnz == 0
