"""``python -m scp.bench reader``: where the local reader's time goes on this CPU — prefill against decode, one
thread against two, float32 against bfloat16 — on the prompts notebook 10 reads.

Prompts: the first test questions of HotpotQA and MuSiQue with their whole context ("Title: sentence" units) and with
every other unit (about the token count of a keep ratio of 0.5).  Prefill: ``answer_logprob`` (the prompt and a*
teacher-forced, no decoding), one prompt per call, seconds per prompt.  Read: ``answer_and_logprob`` on all prompts of
a dataset and context at once, as the notebook calls it (one prefill per prompt, greedy decoding of up to
``max_new_tokens`` tokens ``batch_size`` prompts at a time), seconds per prompt; decode = read − prefill.  bfloat16:
the share of greedy answers whose text changes and |Δ log P(a*)| against float32 on the same prompts.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
import torch

from scp.bench.common import RESULTS, environment, write_result

DATASETS = ("hotpotqa", "musique")
CONFIGS = (("float32", 1), ("float32", 2), ("bfloat16", 1))
"""(dtype, torch threads) measured; float32 on one thread is what notebook 10 runs."""


def prompts(dataset: str, count: int) -> dict[str, tuple[list[str], list[list[str]], list[str]]]:
    """context kind -> (questions, unit lists, gold answers) of the first ``count`` test examples."""
    from scp.data.datasets import load_dataset

    examples = load_dataset(dataset, split="test")[:count]
    questions = [e.query for e in examples]
    answers = [e.answers[0] for e in examples]  # the first gold answer, as notebook 10 scores a*
    full = [e.unit_texts(with_title=True) for e in examples]
    return {"full": (questions, full, answers), "half": (questions, [u[::2] for u in full], answers)}


def measure(lm, questions, contexts, answers) -> dict:
    """Seconds per prompt of prefill (one call each) and of a batched read, tokens, answers and log P(a*)."""
    from scp.llm.readers import answer_and_logprob, answer_logprob

    tokens = [len(lm.prompt_ids(q, c)) for q, c in zip(questions, contexts)]
    prefill = []
    for q, c, a in zip(questions, contexts, answers):
        t0 = time.perf_counter()
        answer_logprob(lm, [q], [c], [a])
        prefill.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    read, logp = answer_and_logprob(lm, questions, contexts, answers)
    per_read = (time.perf_counter() - t0) / len(questions)
    return {
        "prompt_tokens": float(np.mean(tokens)),
        "prefill_s": statistics.median(prefill),
        "prefill_tokens_per_s": float(sum(tokens) / sum(prefill)),
        "read_s": per_read,
        "decode_s": per_read - statistics.mean(prefill),
        "answers": [r.text for r in read],
        "logprob": [float(x) for x in logp],
    }


def reader(quick: bool = False, out_dir: Path = RESULTS) -> dict:
    """Every (dtype, threads) of :data:`CONFIGS` on every dataset and context kind; bfloat16 compared with float32
    on one thread.  Writes ``results/bench/reader.json``."""
    from scp.llm.readers import LocalReader

    count, max_new_tokens = (2, 4) if quick else (8, 16)
    sets = {d: prompts(d, count) for d in DATASETS}
    rows = []
    for dtype, threads in CONFIGS:
        torch.set_num_threads(threads)
        lm = LocalReader(max_new_tokens=max_new_tokens, batch_size=8, dtype=dtype)
        for dataset, kinds in sets.items():
            for kind, (qs, cs, ans) in kinds.items():
                rows.append(
                    {"dtype": dtype, "threads": threads, "dataset": dataset, "context": kind} | measure(lm, qs, cs, ans)
                )
                print(
                    f"{dtype}, {threads} thread(s), {dataset} {kind}: {rows[-1]['read_s']:.2f} s per read", flush=True
                )
        del lm
    torch.set_num_threads(1)
    result = {
        "env": environment("cpu", quick),
        "questions": count,
        "max_new_tokens": max_new_tokens,
        "batch_size": 8,
        "rows": rows,
        "bfloat16": bf16_effect(rows),
    }
    write_result(result, "reader.json", out_dir)
    print(format_reader(result))
    return result


def bf16_effect(rows: list[dict]) -> dict:
    """Greedy answers changed and |Δ log P(a*)| of bfloat16 against float32, one thread, over every prompt."""
    base = {(r["dataset"], r["context"]): r for r in rows if r["dtype"] == "float32" and r["threads"] == 1}
    changed = total = 0
    deltas: list[float] = []
    for r in rows:
        ref = base.get((r["dataset"], r["context"]))
        if r["dtype"] != "bfloat16" or ref is None:
            continue
        changed += sum(a != b for a, b in zip(r["answers"], ref["answers"]))
        total += len(r["answers"])
        deltas += [abs(a - b) for a, b in zip(r["logprob"], ref["logprob"])]
    if not total:
        return {}
    return {
        "answers_changed": changed,
        "answers": total,
        "logprob_abs_diff_median": statistics.median(deltas),
        "logprob_abs_diff_max": max(deltas),
    }


def format_reader(result: dict) -> str:
    lines = [
        f"SmolLM2-135M-Instruct through transformers; {result['questions']} test questions per dataset, answers of up "
        f"to {result['max_new_tokens']} tokens decoded {result['batch_size']} prompts at a time; medians over prompts",
        "",
        "| dtype | threads | dataset | context | prompt tokens (mean) | prefill s per prompt | prefill tokens/s | "
        "read s per prompt | of which decode |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['dtype']} | {r['threads']} | {r['dataset']} | {r['context']} | {r['prompt_tokens']:.0f} | "
            f"{r['prefill_s']:.2f} | {r['prefill_tokens_per_s']:.0f} | {r['read_s']:.2f} | {r['decode_s']:.2f} |"
        )
    b = result.get("bfloat16") or {}
    if b:
        lines += [
            "",
            f"bfloat16 against float32 (one thread, same prompts): {b['answers_changed']} of {b['answers']} greedy "
            f"answers change; |Δ log P(a*)| median {b['logprob_abs_diff_median']:.3f}, max "
            f"{b['logprob_abs_diff_max']:.3f} nats.",
        ]
    return "\n".join(lines)
