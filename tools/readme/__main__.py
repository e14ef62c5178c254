"""``python -m tools.readme``: see :mod:`tools.readme`."""

import sys

from tools.readme import main

sys.exit(main())
