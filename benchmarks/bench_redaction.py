"""Cost of redaction before write: the built-in scanner per payload.

Measures ``Redactor().redact(type, data, None)`` -- what the write path runs
on every event -- for four payloads (a typical 1 KB assistant message and a
16 KB tool output, each without a secret and with one), against two
references measured in the same process, interleaved round by round:

* ``old``: the scanner as it was before the prefilter (every rule's regex
  over every string, a path built for every string), kept here as the
  baseline -- same rules, same findings;
* ``json``: ``json.dumps`` of the same payload (what serializing it costs).

Each figure is the median over ``--rounds`` interleaved rounds (>= 5) of
the mean time per call in that round, with the [min, max] range; the
ratios are medians too.  The machine is noisy: read the ratios.

    python benchmarks/bench_redaction.py [--rounds 7] [--quick]

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from trajlog.redaction import BUILTIN, Finding, PatternScanner, RedactionPolicy, Redactor, strings

SECRET = "AKIA" + "Q4ZJ7W2XK9LM3NPR"


class OldScanner:
    """The pre-prefilter scanner (the baseline): every rule over every string."""

    def __init__(self, scanner: PatternScanner) -> None:
        self.rules = scanner.rules

    def scan(self, value: Any) -> list[Finding]:
        out: list[Finding] = []
        for path, text in strings(value):
            taken: list[tuple[int, int]] = []
            for rule in self.rules:
                for m in rule.pattern.finditer(text):
                    group = "v" if "v" in rule.pattern.groupindex and m.group("v") else 0
                    start, end = m.span(group)
                    if rule.check is not None and not rule.check(m.group(group)):
                        continue
                    if any(s < end and start < e for s, e in taken):
                        continue
                    taken.append((start, end))
                    out.append(Finding(rule.kind, path, start, end))
        return out


_TEXT = ("the function returns a list of events and the caller checks each one before it "
         "writes them; tests cover the edge cases where the log is empty or the session "
         "was forked at turn 12 of 40 and the index was rebuilt")
_WORDS = _TEXT.split(" ")


def _prose(rng: random.Random, size: int) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        w = rng.choice(_WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:size]


def _tool_output(rng: random.Random, size: int) -> str:
    """A test run's or a grep's output: paths, line numbers, code."""
    lines: list[str] = []
    n = 0
    i = 0
    while n < size:
        i += 1
        line = rng.choice([
            f"src/trajlog/api/writer.py:{rng.randint(1, 600)}: def apply(self, tx, ref):",
            f"tests/test_store.py::test_case_{i} PASSED [{rng.randint(0, 100)}%]",
            f"    assert events[{rng.randint(0, 9)}].seq == {rng.randint(0, 99999)}",
            "    for ev in self._reading.events(ref, first, last, want=_followed):",
            f"INFO 2024-05-{rng.randint(10, 28)} 12:{rng.randint(10, 59)}:07 committed "
            f"{rng.randint(1, 64)} rows in {rng.random():.3f}s",
        ])
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines)[:size]


def payloads() -> dict[str, tuple[str, Any]]:
    rng = random.Random(17)
    msg = _prose(rng, 1024)
    out = _tool_output(rng, 16 * 1024)
    mid = len(out) // 2
    return {
        "assistant_1KB": ("assistant/message", {"content": msg, "tool_calls": [
            {"id": "call_1", "name": "grep", "arguments": {"pattern": "apply", "path": "src"}}]}),
        "assistant_1KB_secret": ("assistant/message", {
            "content": msg[:500] + f" key {SECRET} " + msg[500:1000], "tool_calls": []}),
        "tool_16KB": ("tool/result", {"call_id": "call_1", "output": out, "is_error": False}),
        "tool_16KB_secret": ("tool/result", {
            "call_id": "call_1", "output": out[:mid] + f"\nAWS_ACCESS_KEY_ID={SECRET}\n"
            + out[mid:], "is_error": False}),
    }


def _per_call(fn: Callable[[], object], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rounds = max(5, args.rounds)
    new = Redactor(RedactionPolicy())
    old = Redactor(RedactionPolicy(scanners=(OldScanner(BUILTIN),)))
    results: dict[str, Any] = {}
    for name, (type_, data) in payloads().items():
        # same findings, or the comparison means nothing
        assert new.redact(type_, data, None) == old.redact(type_, data, None), name
        n = max(5, (40 if args.quick else 200) * 1024 // max(1, len(json.dumps(data))))
        samples: dict[str, list[float]] = {"new": [], "old": [], "json": []}
        calls: dict[str, Callable[[], object]] = {
            "new": lambda t=type_, d=data: new.redact(t, d, None),
            "old": lambda t=type_, d=data: old.redact(t, d, None),
            "json": lambda d=data: json.dumps(d)}
        for _ in range(rounds):   # interleaved: drift hits all three alike
            for k, fn in calls.items():
                samples[k].append(_per_call(fn, n))
        fig: dict[str, Any] = {}
        for k, v in samples.items():
            fig[f"{k}_us"] = round(statistics.median(v) * 1e6, 2)
            fig[f"{k}_range_us"] = [round(min(v) * 1e6, 2), round(max(v) * 1e6, 2)]
        fig["new_over_old"] = round(statistics.median(
            a / b for a, b in zip(samples["new"], samples["old"], strict=True)), 3)
        fig["new_over_json"] = round(statistics.median(
            a / b for a, b in zip(samples["new"], samples["json"], strict=True)), 2)
        fig["findings"] = len(new.redact(type_, data, None).findings)
        results[name] = fig
        print(f"{name:22s} new {fig['new_us']:9.2f} us {fig['new_range_us']}  "
              f"old {fig['old_us']:9.2f} us {fig['old_range_us']}  "
              f"json {fig['json_us']:8.2f} us  new/old {fig['new_over_old']:.3f}  "
              f"new/json {fig['new_over_json']:.2f}")
    print(json.dumps({"bench": "redaction", "rounds": rounds, "python": platform.python_version(),
                      "results": results}))


if __name__ == "__main__":
    main()
