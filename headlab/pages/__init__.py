"""One module per page of the book, named after its page (``notebooks/05_term_matching.ipynb``:
:mod:`headlab.pages.term_matching`): the page's claims, declared beside the code that measures and judges them, and
the functions its notebook calls. :mod:`headlab.pages.claims` gathers every page's claims for the scorecard. A page
imports measures and the rule, never another page (``tests/test_layers.py``)."""
