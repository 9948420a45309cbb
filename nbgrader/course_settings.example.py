"""The instructor's private grading settings: copy this file to ``course_settings.py`` beside it
(``cp course_settings.example.py course_settings.py``), which git ignores, and edit the copy.

``nbgrader_config.py`` reads ``course_settings.py`` (so ``nbgrader autograde``, the formgrader's
button and ``tools/coursework.py`` all see the same settings); the names are those of
``c.CourseGrading`` in tools/grading/settings.py, and docs/INSTRUCTORS.md explains each one.
A course folder made with ``coursework.py --course-dir DIR`` reads ``DIR/course_settings.py``.
"""

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

# The secret the hidden cases' inputs are drawn from (`python -m tools.coursework secret`
# writes one there); unset, the default below is used if it exists.
# c.CourseGrading.secret_file = "~/.config/transformer-block-course/hidden-cases.key"

# Due dates (these win over nbgrader's own `nbgrader db assignment add --duedate`), the late
# policy ("*": every assignment) and extensions by student and assignment.
c.CourseGrading.due = {"lesson04": "2027-03-01 17:00:00 UTC"}
c.CourseGrading.late = {"*": {"percent_per_day": 10, "cap_percent": 50, "grace_minutes": 15}}
c.CourseGrading.extensions = {"alice": {"lesson04": {"days": 2}}}
