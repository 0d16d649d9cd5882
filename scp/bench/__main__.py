"""``python -m scp.bench SECTION``: the benchmarks of :mod:`scp.bench.benchmarks`."""

import sys

from scp.bench import main

sys.exit(main())
