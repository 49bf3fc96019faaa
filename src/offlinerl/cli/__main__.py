import sys

from offlinerl.cli import main

sys.exit(main())
