import sys

from kdgat.cli import main

sys.exit(main())
