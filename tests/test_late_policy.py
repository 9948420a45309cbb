"""The course's late-submission policy (tools/grading/saveverdicts.py, ``penalty`` and
``extension_delta``; set in one place, ``c.CourseGrading.late`` and ``.extensions``): the points
taken for a submission by how late it is, and the extra time a student was granted."""

import sys
from datetime import timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

from grading.saveverdicts import extension_delta, penalty  # noqa: E402

DAY, MINUTE = 86400.0, 60.0
POLICY = {"*": {"percent_per_day": 10, "cap_percent": 50, "grace_minutes": 15}}


@pytest.mark.parametrize(
    ("seconds_late", "taken"),
    [
        (-5 * DAY, 0.0),  # early
        (0.0, 0.0),  # on time
        (15 * MINUTE, 0.0),  # inside the grace period
        (16 * MINUTE, 1.0),  # a started day: 10 % of the 10 points earned
        (DAY, 1.0),  # exactly one day
        (DAY + 1, 2.0),  # into the second day
        (4.5 * DAY, 5.0),  # five started days: 50 %, the cap
        (30 * DAY, 5.0),  # never more than the cap
    ],
)
def test_late_penalty_is_a_percentage_per_started_day_after_the_grace_period_up_to_the_cap(
    seconds_late, taken
):
    assert penalty(POLICY, "lesson04", 10.0, seconds_late) == pytest.approx(taken)


def test_late_penalty_is_a_share_of_the_points_earned():
    assert penalty(POLICY, "lesson04", 0.0, 3 * DAY) == 0.0  # nothing earned, nothing taken
    assert penalty(POLICY, "lesson04", 7.0, 3 * DAY) == pytest.approx(2.1)


def test_late_policy_of_an_assignment_overrides_the_course_wide_one():
    policies = {**POLICY, "lesson09": {"zero": True}}
    assert penalty(policies, "lesson09", 8.0, MINUTE) == 8.0  # late at all: nothing earned
    assert penalty(policies, "lesson04", 8.0, MINUTE) == 0.0  # the "*" grace period
    assert penalty({}, "lesson04", 8.0, 10 * DAY) == 0.0  # no policy: no penalty


def test_extension_is_the_granted_time_for_that_student_and_assignment_only():
    extensions = {"alice": {"lesson04": {"days": 2, "hours": 6}}}
    assert extension_delta(extensions, "alice", "lesson04") == timedelta(days=2, hours=6)
    assert extension_delta(extensions, "alice", "lesson05") is None
    assert extension_delta(extensions, "bob", "lesson04") is None
