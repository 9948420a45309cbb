"""The course's grading, outside the student's process (issue "Grades that a one-line cheat
cannot earn"; docs/INSTRUCTORS.md says what it guarantees and what it cannot).

* :mod:`confine`: the kernel nbgrader's autograder runs a submission in (bubblewrap: a host user
  without privilege whoever grades, own PID namespace, read-only system, no course folder, one
  share of memory, processes and time per student);
* :mod:`verdicts`: compares what each hidden test recorded of a student's answer
  (``helpers.grading.record``) with what the instructor's solution recorded for the same cases;
* :mod:`spec`: per exercise, how its records are compared and which functions it forbids;
* :mod:`review`: the solution cells that reach for the grading machinery, for a person to read;
* what ``python -m tools.coursework`` does, split as nbgrader splits its apps: :mod:`course` (the
  course folder, exercises, nbgrader, the gradebook), :mod:`release`, :mod:`collect`, :mod:`pool`
  (the worker pool, beside :mod:`worker`), :mod:`resume`, :mod:`export` (scores, late penalties,
  the CSV) and :mod:`manual` (grading by hand).

Nothing in this folder is installed with ``helpers`` or copied into a student release, and the
confined kernel cannot read it.
"""
