"""``python -m scp.bench SECTION``: the benchmarks' command line, :mod:`scp.bench.cli`."""

import sys

from scp.bench import main

sys.exit(main())
