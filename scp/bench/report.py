"""``python -m scp.bench report``: rewrite the generated tables of BENCHMARKS.md (the blocks between
``<!-- bench:NAME -->`` markers) from results/bench/*.json."""

from __future__ import annotations

import json
from pathlib import Path

from scp.bench.accuracy import format_accuracy
from scp.bench.adaptive import format_adaptive
from scp.bench.certify import format_certify
from scp.bench.common import DOC, RESULTS
from scp.bench.estimator import format_estimator
from scp.bench.gpu import GPU_COMMAND, GPU_FILE, format_gpu
from scp.bench.long_contexts import format_long
from scp.bench.prefix import format_prefix
from scp.bench.reader import format_reader
from scp.bench.structural import format_structural
from scp.bench.training import format_training
from scp.errors import InputError

SECTIONS = {  # marker in BENCHMARKS.md -> (json file, formatter)
    "estimator": ("estimator.json", format_estimator),
    "accuracy": ("accuracy.json", format_accuracy),
    "prefix": ("prefix.json", format_prefix),
    "long": ("long.json", format_long),
    "adaptive": ("adaptive.json", format_adaptive),
    "structural": ("structural.json", format_structural),
    "certify": ("certify.json", format_certify),
    "training": ("training.json", format_training),
    "reader": ("reader.json", format_reader),
}


def environment_table(results: dict[str, dict]) -> str:
    lines = [
        "| benchmark | CPU | logical cores | affinity | torch threads | torch | shapiq | shap | run | date | "
        "load average (1, 5, 15 min) at the end |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, res in results.items():
        e = res.get("env") or res.get("meta") or {}  # scp.bench.e2e names some fields its own way
        cpu = e.get("cpu", "—")
        cores = e.get("logical_cores", e.get("cpu_count", "?"))
        affinity = e.get("affinity", f"{e['cpus_usable']} usable" if "cpus_usable" in e else "?")
        threads = e.get("threads", e.get("torch_threads", "?"))
        loadavg = e.get("loadavg", e.get("loadavg_end"))
        load = ", ".join(f"{x:.2f}" for x in loadavg) if loadavg else "?"
        lines.append(
            f"| {name} | {cpu} | {cores} | {affinity} | {threads} | {e.get('torch', '?')} | "
            f"{e.get('shapiq', '—')} | {e.get('shap') or '—'} | {'quick' if e.get('quick') else 'full'} | "
            f"{e.get('date', '?')} | {load} |"
        )
    return "\n".join(lines)


def report(out_dir: Path = RESULTS, doc: Path = DOC) -> None:
    """Replace each ``<!-- bench:NAME -->…<!-- /bench:NAME -->`` block of BENCHMARKS.md with the table rendered
    from results/bench/NAME.json (or a note that it has not been run)."""
    text = Path(doc).read_text()
    loaded = {}
    for name, (file, fmt) in SECTIONS.items():
        path = Path(out_dir) / file
        if path.is_file():
            loaded[name] = json.loads(path.read_text())
            body = fmt(loaded[name])
        else:
            body = f"_not run yet: `python -m scp.bench {name}` writes {path}_"
        text = _replace_block(text, name, body)
    e2e = Path(out_dir) / "endtoend.json"
    if e2e.is_file():
        from scp.bench.e2e import format_table

        loaded["endtoend"] = json.loads(e2e.read_text())
        text = _replace_block(text, "endtoend", format_table(loaded["endtoend"]))
    gpu_json = Path(out_dir) / GPU_FILE
    if gpu_json.is_file():
        body = format_gpu(json.loads(gpu_json.read_text()))
    else:
        body = (
            f"_The GPU check has not run on a GPU yet: on a machine with an NVIDIA GPU run `{GPU_COMMAND}`; it "
            f"writes {gpu_json}._"
        )
    text = _replace_block(text, "gpu", body)
    text = _replace_block(text, "environment", environment_table(loaded))
    Path(doc).write_text(text)
    print(f"{doc} regenerated from {out_dir}/*.json")


def _replace_block(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    if begin not in text or end not in text:
        raise InputError(f"BENCHMARKS.md has no {begin} … {end} block")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body.strip()}\n{end}{tail}"
