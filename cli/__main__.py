"""``python -m posenc.cli``: the ``posenc`` command."""

import sys

from posenc.cli import main

sys.exit(main())
