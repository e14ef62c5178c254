"""``python -m headlab.report``: fetch the JavaScript the book ships (:func:`headlab.report.bookjs.fetch_scripts`)."""

from headlab.report.bookjs import fetch_scripts

fetch_scripts()
