"""``python -m offlinerl``: the same as the ``offlinerl`` command."""

import sys

from offlinerl.cli import main

sys.exit(main())
