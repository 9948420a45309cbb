"""nbgrader configuration of the Transformer block course (lessons 4 to 8 and the capstone).

This folder is an nbgrader course directory. ``python -m tools.coursework release`` copies the
committed lesson notebooks (the instructor versions) into ``source/lessonNN/`` and runs nbgrader's
own ``generate_assignment`` on each, writing the student versions to ``release/lessonNN/``.
Everything nbgrader writes here (source, release, submitted, autograded, feedback, gradebook.db)
is generated, and ignored by git: see ``.gitignore`` beside this file and docs/INSTRUCTORS.md.

Run nbgrader from this folder (``cd nbgrader && nbgrader ...``) so that it reads this file.
"""

import os
import sys

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

# The course's grading code (the package `tools.grading`, never installed with helpers nor
# released): nbgrader imports the classes named below from the repository that holds `tools/`,
# which is not installed, so its folder goes on the path here (the one place: nbgrader reads this
# file whatever folder it runs from, the formgrader included). `coursework.py` names the tools
# folder in COURSE_TOOLS when it runs nbgrader on another course folder.
TOOLS = os.environ.get("COURSE_TOOLS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir, "tools"
)
REPOSITORY = os.path.dirname(os.path.abspath(TOOLS))
if REPOSITORY not in sys.path:
    sys.path.insert(0, REPOSITORY)

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

# Autograding, the course's way (docs/INSTRUCTORS.md), for `nbgrader autograde` and the
# formgrader's button as for `python -m tools.coursework autograde`: nbgrader's Execute is
# replaced by the confined grading kernel run from a private folder, with the demonstration
# cells no exercise needs skipped (tools/grading/execute.py); SaveAutoGrades (points from what
# the kernel printed) by the verdicts of the hidden records against the instructor's
# (tools/grading/saveverdicts.py).
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    GetGrades,
    IgnorePattern,
    LimitOutput,
)

c.Autograde.autograde_preprocessors = [
    "tools.grading.execute.ConfinedExecute",
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    "tools.grading.saveverdicts.SaveVerdicts",
    AssignLatePenalties,
    CheckCellMetadata,
    "tools.grading.sanitize.SanitizeStudentContent",
]
c.AssignLatePenalties.plugin_class = "tools.grading.saveverdicts.LatePenalty"
# A check cell the student deleted is put back (and graded), not a reason to fail the notebook.
c.OverwriteCells.add_missing_cells = True
# The feedback never shows the hidden tests (their code and inputs), nor any output that ran after
# them (tools/grading/feedbackoutputs.py), and what it renders from the student is inert.
c.GenerateFeedback.preprocessors = [
    GetGrades,
    ClearHiddenTests,
    "tools.grading.feedbackoutputs.HideOutputsAfterHiddenTests",
    "tools.grading.sanitize.SanitizeStudentContent",
    CSSHTMLHeaderPreprocessor,
]
# What the formgrader and the feedback render from a student is inert (tools/grading/sanitize.py):
# the stored autograded notebook is cleaned last in autograde (above), and every HTMLExporter
# nbgrader makes (the formgrader's view of a submission, the feedback page) cleans it again.
c.HTMLExporter.preprocessors = ["tools.grading.sanitize.SanitizeStudentContent"]
c.ClearHiddenTests.enforce_metadata = False

# The course's grading settings (tools/grading/settings.py): the instructor's secret, skipping,
# due dates, the late policy and extensions are private: in `course_settings.py` beside this
# file (git-ignored; `cp course_settings.example.py course_settings.py`), read here if present.
load_subconfig("course_settings.py")  # noqa: F821 - provided by traitlets, like get_config

# `nbgrader validate` (and the Validate button) cut each line of a verdict at 90 characters by
# default; the checks' verdicts are one line, often longer.
c.Validator.width = 400
