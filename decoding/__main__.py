"""``python -m decoding``: the command line (:mod:`decoding.cli`)."""

import sys

from decoding.cli import main

sys.exit(main())
