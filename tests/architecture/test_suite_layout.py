"""The test suite's own shape: every test file in the folder of what it tests, none at the
top of ``tests/`` (where only conftest and the shared helpers live), basenames unique
(pytest imports each file by its basename, as the folders are not packages), and no test
file importing another (what tests share is a helper module at the top)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PLUGIN_FOLDERS = {"toy_plugin", "scipy_plugin"}  # installable example plugins, not tests


def _test_files(tests: Path) -> list[Path]:
    return sorted(p for p in tests.rglob("test_*.py")
                  if not PLUGIN_FOLDERS & set(p.relative_to(tests).parts))


def layout_problems(tests: Path) -> list[str]:
    """What is out of place in the suite under ``tests``, one line each."""
    files = _test_files(tests)
    problems = [f"{p.relative_to(tests)}: a test file belongs in a folder of tests/, "
                f"not at its top or deeper" for p in files if len(p.relative_to(tests).parts) != 2]
    problems += [f"{name} is the name of {count} test files (pytest imports each by its basename)"
                 for name, count in sorted(Counter(p.name for p in files).items()) if count > 1]
    problems += [f"{p.relative_to(tests)}: not a package folder (pytest would name its modules "
                 f"differently)" for p in sorted(tests.rglob("__init__.py"))
                 if not PLUGIN_FOLDERS & set(p.relative_to(tests).parts)]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            problems += [f"{path.relative_to(tests)} imports the test module {name}: move what "
                         f"it shares into a helper module at the top of tests/"
                         for name in names if name.split(".")[0].startswith("test_")]
    return problems


def test_every_test_file_sits_in_the_folder_of_what_it_tests() -> None:
    assert layout_problems(TESTS) == []


def test_the_check_above_can_fail(tmp_path: Path) -> None:
    for path, text in {"test_loose.py": "", "core/test_a.py": "from test_b import x\n",
                       "cli/test_b.py": "import test_a\n", "cli/test_a.py": "",
                       "deep/er/test_c.py": "", "data/__init__.py": "",
                       "toy_plugin/test_plugin.py": "", "helpers.py": "import test_a\n"}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    found = layout_problems(tmp_path)
    assert [line.split(":")[0].split(" ")[0] for line in found] == [
        "deep/er/test_c.py", "test_loose.py", "test_a.py", "data/__init__.py",
        "cli/test_b.py", "core/test_a.py"], found
