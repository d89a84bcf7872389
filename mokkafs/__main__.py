import sys

from mokkafs.entry import main

sys.exit(main())
