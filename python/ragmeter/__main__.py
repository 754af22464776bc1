import sys

from ragmeter.cli import main

sys.exit(main())
