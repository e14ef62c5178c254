"""``python -m headlab.models``: pretrain a model headlab names (see :func:`headlab.models.pretrain.main`)."""

import sys

from headlab.models.pretrain import main

sys.exit(main())
