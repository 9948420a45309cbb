"""nbgrader settings every user of the classroom hub shares (students and instructors).

A real installation copies this file and ``owner_exchange.py`` into the course environment's
``etc/jupyter/`` (``<COURSE_ENV>/etc/jupyter``, read by every Jupyter and ``nbgrader`` run from
that environment, and by no other), or into ``/etc/jupyter/`` (read by every Jupyter on the
machine, whatever its environment); the hub's test points
``JUPYTER_CONFIG_PATH`` at a copy instead. The instructor's course folder (``nbgrader/`` of a
clone of the course) adds its own ``nbgrader_config.py`` on top when nbgrader runs there.

* ``Exchange.root``: the exchange, a folder on one file system that every user's server sees,
  mode 0777 (nbgrader resets it to that on every release). ``COURSE_EXCHANGE`` overrides it.
* ``ExchangeFactory.collect``: ``owner_exchange.OwnerCollect`` files each submission under the
  Unix user who made it, not under the ``--student`` name it carries (see that file).
* ``Validator.width``: ``nbgrader validate`` (the command; the Validate button shows verdicts
  whole) cuts every line of a failing check's output at this width minus 3 (nbgrader's default
  90); the course's verdicts are one line that names the problem, often longer than that.
* ``ExchangeFactory.submit``: ``owner_exchange.OwnerSubmit`` leaves each submission's folder
  writable by its owner alone (nbgrader's own makes it 0777: a classmate could add or delete files).
"""

import os
import sys

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # owner_exchange, beside this file

c.CourseDirectory.course_id = "transformer-block"
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
c.ExchangeFactory.collect = "owner_exchange.OwnerCollect"
c.ExchangeFactory.submit = "owner_exchange.OwnerSubmit"
c.Validator.width = 400
