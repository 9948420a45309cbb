"""The course's maintainers' and instructors' tools, a package run from the repository's root
(``python -m tools.coursework ...``, ``python -m tools.build_site``; the data tools also run as
files, ``python tools/NAME.py``).
Never installed with ``helpers`` nor copied into a student release: ``tools.grading`` is the
grader (docs/INSTRUCTORS.md), the other modules rebuild the course's data and pages
(CONTRIBUTING.md).
"""
