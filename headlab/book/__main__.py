"""``python -m headlab.book``: build the book (see :mod:`headlab.book.build`)."""

import sys

from headlab.book.build import main

sys.exit(main())
