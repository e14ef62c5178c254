"""``python -m headlab.inputs``: fetch the pinned assets (see :func:`headlab.inputs.assets.main`)."""

import sys

from headlab.inputs.assets import main

sys.exit(main())
