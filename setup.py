"""The build step that puts the lessons into the wheel (the project's metadata is pyproject.toml).

``build_py`` writes the *student* versions of the committed ``notebooks/*.ipynb`` (solutions
replaced by the stub, hidden tests removed, outputs cleared: ``helpers.notebooks.student_version``)
into the built package as ``helpers/lessons/``, so that ``python -m helpers.notebooks DIR`` works
after ``pip install`` and a wheel handed to students holds no solution. ``notebooks/`` stays the
one source; tests/test_installed_course.py checks the wheel's copies against it.
"""

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithLessons(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return  # an editable install reads notebooks/ itself
        spec = importlib.util.spec_from_file_location(
            "_course_notebooks", HERE / "helpers" / "notebooks.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # the standard library only: no torch at build time
        target = Path(self.build_lib) / "helpers" / "lessons"
        if target.exists():
            for old in target.glob("*.ipynb"):
                old.unlink()
        module.write_lessons(target, full=False, source=HERE / "notebooks")


setup(cmdclass={"build_py": BuildPyWithLessons})
