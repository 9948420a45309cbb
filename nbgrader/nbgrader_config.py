"""nbgrader configuration of the Transformer block course (lessons 4 to 8 and the capstone).

This folder is an nbgrader course directory. ``python tools/coursework.py release`` copies the
committed lesson notebooks (the instructor versions) into ``source/lessonNN/`` and runs nbgrader's
own ``generate_assignment`` on each, writing the student versions to ``release/lessonNN/``.
Everything nbgrader writes here (source, release, submitted, autograded, feedback, gradebook.db)
is generated, and ignored by git: see ``.gitignore`` beside this file and docs/INSTRUCTORS.md.

Run nbgrader from this folder (``cd nbgrader && nbgrader ...``) so that it reads this file.
"""

import os

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

c.CourseDirectory.course_id = "transformer-block"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))  # this folder
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"

# The exercises are functions whose body nbgrader replaces by this stub in the student version:
# the notebook still runs top to bottom, and each check cell then says "not implemented yet".
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# nbgrader stops a cell after 30 s by default; the lessons' longest cells (a small training run
# in lesson 8) need more on a slow machine. The limit is per cell, not per notebook.
c.Execute.timeout = 600

# nbgrader's autograder gives 0 points to a test cell that shows an error OR writes to stderr.
# The course's check cells raise helpers.checks.ExerciseFailed for a wrong answer (an
# AssertionError: 0 points) and print a line to stdout for a right one (full points).

# `nbgrader validate` (and the Validate button) cut each line of a verdict at 90 characters by
# default; the checks' verdicts are one line, often longer.
c.Validator.width = 400
