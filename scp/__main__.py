import sys

from scp.cli import main

sys.exit(main())
