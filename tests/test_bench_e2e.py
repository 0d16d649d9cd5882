"""scp.bench.e2e: its table and argument checks (a --quick run takes ~50 s on one core, too long for the suite;
run it by hand: python -m scp.bench.e2e --quick --out /tmp/e2e.json)."""

import pytest

from scp.bench.e2e import format_table, main, timing_summary


def test_rows_hold_median_min_max_and_the_table_shows_them():
    rows = [
        timing_summary("(a) prune one context", "s", [0.3, 0.1, 0.2]),
        timing_summary("(d) scp prune", "records/s", [120.0, 80.0, 100.0, 90.0, 110.0], "M = 50"),
    ]
    assert (rows[0]["median"], rows[0]["min"], rows[0]["max"], rows[0]["repeats"]) == (0.2, 0.1, 0.3, 3)
    meta = {
        "torch_threads": 1,
        "cpus_usable": 1,
        "loadavg_start": [1.5, 0, 0],
        "loadavg_end": [2.25, 0, 0],
        "quick": True,
    }
    lines = format_table({"meta": meta, "rows": rows}).splitlines()
    assert lines[0] == "End-to-end, torch threads = 1, CPUs usable = 1, load average 1.50 → 2.25 (quick)"
    assert lines[2] == "| measurement | median | min | max | unit | repeats | note |"
    assert lines[3] == "|---|---|---|---|---|---|---|"
    assert lines[4] == "| (a) prune one context | 0.2 | 0.1 | 0.3 | s | 3 |  |"
    assert lines[5] == "| (d) scp prune | 100 | 80 | 120 | records/s | 5 | M = 50 |"


@pytest.mark.parametrize("argv", [["--repeats", "0"], ["--threads", "0"], ["--out", "."]])
def test_bad_arguments_stop_before_measuring(argv, capsys):
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2 and "error:" in capsys.readouterr().err
