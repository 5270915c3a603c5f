import sys

from interlock.cli import main

sys.exit(main())
