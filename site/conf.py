"""Sphinx configuration of the course's reading site.

Not run from this folder: ``python tools/build_site.py`` copies this folder into a temporary
source folder, adds the lesson pages (the committed, executed notebooks in their student or
instructor view) and ``site_settings.json`` (repository, branch, launch addresses), then runs
Sphinx on it. Nothing is executed (``nb_execution_mode = "off"``): every output on the site is
a stored output of a committed notebook.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

SETTINGS = json.loads((HERE / "site_settings.json").read_text())

project = SETTINGS["title"]
author = "the course team"
copyright = "the course team"  # noqa: A001 - Sphinx's name
language = "en"

extensions = [
    "myst_nb",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3.2.2 copied into _static/mathjax: no CDN
    "course_site",
    "sphinx.ext.githubpages",  # .nojekyll: GitHub Pages serves _static/ and _images/ as they are
]

exclude_patterns = ["_build", "site_settings.json", "intro.md", "notebooks/download/**"]
templates_path = []
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_title = SETTINGS["title"]
html_last_updated_fmt = None
html_show_sourcelink = False
html_copy_source = False  # the notebook to download is notebooks/download/NAME.ipynb
html_show_sphinx = False
html_use_index = False  # no API to index: the lessons and the search page

# The stored outputs only: nothing runs at build time.
nb_execution_mode = "off"
nb_merge_streams = True
nb_ipywidgets_js = {}  # no widget JavaScript from a CDN: explorers are stills (tools/build_site.py)
nb_output_stderr = "show"
# A described figure stores text/html (<img alt> for JupyterLab), image/png with its description in
# the output metadata, and text/plain: the site takes the PNG (a file, and its alt from the metadata).
nb_mime_priority_overrides = [("html", "image/png", 25)]

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 6
myst_heading_slug_func = "course_site.jupyterlab_slug"  # anchors as JupyterLab makes them
myst_dmath_double_inline = True

html_theme = "sphinx_book_theme"
# The theme's sidebar without its logo block, which sits outside every landmark (axe's "region"):
# the home page is the first entry of the navigation instead (home_page_in_toc).
html_sidebars = {"**": ["sbt-sidebar-nav.html"]}  # the search field is in the header
html_theme_options = {
    "repository_url": SETTINGS["repository_url"],
    "repository_branch": SETTINGS["branch"],
    "path_to_docs": "",
    "use_download_button": False,  # the page's own link offers the student notebook
    "use_fullscreen_button": False,
    "use_repository_button": True,
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "launch_buttons": {
        "notebook_interface": "jupyterlab",
        "binderhub_url": SETTINGS["binderhub_url"],
        "jupyterhub_url": SETTINGS["jupyterhub_url"] or "",
    },
    "navigation_with_keys": False,
}
