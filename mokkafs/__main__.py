import sys

from mokkafs.cli import main

sys.exit(main())
