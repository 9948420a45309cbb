"""Release: the student version of each lesson, with nbgrader's own ``generate_assignment``
(nbgrader's GenerateAssignment), in a course folder that holds the course's nbgrader_config.py
(``coursework.py release``; docs/INSTRUCTORS.md, step 4)."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import nbformat

from helpers.course import Lesson

from .course import (
    CONFIG,
    COURSE_DIR,
    NOTEBOOKS,
    ROOT,
    SETTINGS_NAME,
    assignment_id,
    lessons_present,
    nbgrader,
)
from .execute import grading_folder


def prepare_course_dir(course_dir: Path = COURSE_DIR) -> Path:
    """Make ``course_dir`` an nbgrader course folder: the course's nbgrader_config.py in it (a
    copy, which names this checkout's grading code, for a folder other than ``nbgrader/``). A
    copy the instructor has edited is kept as it is (and said so); their settings belong in
    ``course_settings.py`` beside it, which the copy reads."""
    course_dir = Path(course_dir).resolve()
    course_dir.mkdir(parents=True, exist_ok=True)
    if course_dir != CONFIG.parent.resolve():
        text = CONFIG.read_text(encoding="utf-8")
        tools = json.dumps(str(ROOT / "tools"))
        text = text.replace(
            "c = get_config()",
            f'os.environ.setdefault("COURSE_TOOLS", {tools})\nc = get_config()',
            1,
        )
        target = course_dir / CONFIG.name
        record = grading_folder(course_dir) / "config.sha256"
        ours = record.read_text(encoding="utf-8").strip() if record.exists() else None
        if target.exists() and target.read_text(encoding="utf-8") != text:
            current = hashlib.sha256(target.read_bytes()).hexdigest()
            if current != ours:  # written or edited by the instructor: theirs, never replaced
                print(
                    f"coursework: {target} is not the copy coursework.py wrote (edited?): kept as "
                    f"it is, without the course's later changes; the course's settings belong "
                    f"in {SETTINGS_NAME} beside it (delete {target.name} to get the course's)",
                    file=sys.stderr,
                )
                return course_dir
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            record.write_text(hashlib.sha256(text.encode()).hexdigest(), encoding="utf-8")
    return course_dir


def release(
    lessons=None,
    course_dir: Path = COURSE_DIR,
    notebooks: Path = NOTEBOOKS,
    db: bool = True,
) -> dict[str, Path]:
    """Build the student version of each lesson with nbgrader's ``generate_assignment``.

    Returns {assignment id: path of the student notebook}. Lessons default to every lesson whose
    notebook exists; ``db=False`` skips the gradebook (then ``autograde`` cannot be used).
    """
    course_dir = prepare_course_dir(course_dir)
    lessons = lessons_present(notebooks) if lessons is None else list(lessons)
    names = []
    for lesson in lessons:
        src = Path(notebooks) / lesson.notebook
        if not src.exists():
            raise FileNotFoundError(f"{src} does not exist (lesson {lesson.number})")
        source = course_dir / "source" / assignment_id(lesson)
        if source.exists():
            shutil.rmtree(source)
        source.mkdir(parents=True)
        nb = nbformat.read(str(src), as_version=4)
        nb.metadata.pop("widgets", None)  # the saved state of the instructor's live explorers
        nbformat.write(nb, str(source / lesson.notebook))
        names.append(assignment_id(lesson))
    flags = ["--force", *([] if db else ["--no-db"])]
    pattern = _glob_for(names, course_dir / "source")
    for name in [pattern] if pattern else names:  # one nbgrader run for all when a glob fits
        nbgrader(course_dir, "generate_assignment", name, *flags)
    built = {assignment_id(x): student_notebook(x, course_dir) for x in lessons}
    for path in built.values():
        if not path.exists():
            raise RuntimeError(f"nbgrader wrote no {path}")
    return built


def _glob_for(names: list[str], source: Path) -> str | None:
    """A glob matching exactly ``names`` among the folders of ``source`` (nbgrader accepts one)."""
    if len(names) < 2 or len({len(n) for n in names}) != 1:
        return None
    pattern = "".join(
        chars.pop() if len(chars := set(column)) == 1 else "[" + "".join(sorted(chars)) + "]"
        for column in zip(*names, strict=True)
    )
    matched = {p.name for p in source.glob(pattern) if p.is_dir()}
    return pattern if matched == set(names) else None


def student_notebook(lesson: Lesson, course_dir: Path = COURSE_DIR) -> Path:
    """Where ``release`` puts the student version of a lesson."""
    return Path(course_dir).resolve() / "release" / assignment_id(lesson) / lesson.notebook
