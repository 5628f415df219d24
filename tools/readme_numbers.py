#!/usr/bin/env python3
"""Keeps the numbers and command outputs the Markdown files quote from simulated scenarios true.

A quoted number is marked with an HTML comment (invisible on the rendered page) that says where it comes from:

    <!--n scenarios/whatif/h100-tp-heavy.json : tokens_per_s | ,.0f-->109,772 tokens/s
    <!--n a=scenarios/whatif/h100-tp-heavy.json; b=scenarios/whatif/h800-tp-heavy.json :
          (b.tokens_per_s / a.tokens_per_s - 1) * 100 | .1f-->−19.4%

Before ` : ` (a colon between spaces), the runs: `;`-separated, each a scenario and optional `--set PATH=VALUE`
overrides, with an optional `label=` (one unlabelled run's report keys are plain names; labelled ones are
`label.key`). After it, an expression over report keys (dotted paths into `simtrain run --format json`;
`memory.per_stage[0].peak_bytes` indexes a list, `x["key-with-dashes"]` takes any key), numbers, + - * / and
parentheses; after the bar, a Python format spec. The number right after the comment is what the expression gives,
so formatted (with a typographic minus where the quoted one has it).

A command's output quoted in a fenced block is marked the same way, with the lines of its standard output that
the block shows (1-based; `$` is the last line; `...` in the block stands for the lines left out between two ranges):

    <!--output 8-10,$-->
    ```
    $ simtrain compare scenarios/whatif/h100-tp-heavy.json scenarios/whatif/h800-tp-heavy.json
                                                        A              B  B - A
    step time                                     9.552 s       11.846 s  +2.293 s (+24.0%)
    ...
    ```

The block's first line is the command (`$ simtrain ARGS`, run from the repository's root with SIMTRAIN as the
binary); the rest is what those lines of its output are today.

  readme_numbers.py check SIMTRAIN [FILE...]    exit 1 and list each number or block that differs (stale) or cannot
                                                be made
  readme_numbers.py update SIMTRAIN [FILE...]   rewrite them (tools/update-goldens does, after a change meant to move
                                                results)
Without FILE, every Markdown file git tracks that holds a marker. Each distinct run or command runs once, two at a
time.
"""

import ast
import concurrent.futures
import json
import operator
import os
import re
import shlex
import subprocess
import sys

MARKER = re.compile(r"<!--n\s+(?P<spec>(?:(?!-->).)*)-->(?P<number>[-+−]?[\d,]*\.?\d+)", re.S)
OUTPUT = re.compile(r"^<!--output\s+(?P<lines>[^>]*?)\s*-->\n```[^\n]*\n"
                    r"(?P<block>\$ simtrain (?P<args>[^\n]*)\n(?:(?!```)[^\n]*\n)*)```", re.M)
OUTPUT_MARKER = re.compile(r"^<!--output\s", re.M)
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


class MarkerError(Exception):
    pass


def parse(spec):
    """(runs, expression, format): runs as {label: (scenario, (overrides...))}, label '' for an unlabelled run."""
    head, sep, rest = spec.rpartition(" : ")
    expression, bar, fmt = rest.partition("|")
    if not sep or not bar:
        raise MarkerError("expected 'RUNS : EXPRESSION | FORMAT'")
    runs = {}
    for part in head.split(";"):
        try:
            words = shlex.split(part)
        except ValueError as e:
            raise MarkerError(f"{e}: {part.strip()}") from None
        if not words:
            raise MarkerError("an empty run")
        label = ""
        if "=" in words[0] and not words[0].startswith("--"):
            label, _, words[0] = words[0].partition("=")
        scenario, args = words[0], tuple(words[1:])
        if any(a != "--set" and (i == 0 or args[i - 1] != "--set") for i, a in enumerate(args)):
            raise MarkerError(f"a run takes only --set PATH=VALUE after its scenario: {part.strip()}")
        if label in runs:
            raise MarkerError(f"run '{label}' given twice")
        runs[label] = (scenario, args)
    return runs, " ".join(expression.split()), fmt.strip()


def lookup(report, keys):
    value, path = report, ".".join(str(k) for k in keys)
    for key in keys:
        if isinstance(key, int) and isinstance(value, list) and -len(value) <= key < len(value):
            value = value[key]
        elif isinstance(key, str) and isinstance(value, dict) and key in value:
            value = value[key]
        else:
            raise MarkerError(f"the report has no '{path}'")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise MarkerError(f"'{path}' is not a number")
    return float(value)


def evaluate(expression, reports):
    """The expression's value: names are report keys ('step_time_s', 'a.cost.usd_per_gpu_hour')."""
    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
            parts = []  # a.b["key with-dashes"] names the path a.b.key with-dashes
            while isinstance(node, (ast.Attribute, ast.Subscript)):
                if isinstance(node, ast.Attribute):
                    parts.append(node.attr)
                elif isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, (str, int)):
                    parts.append(node.slice.value)
                else:
                    raise MarkerError(f"only a quoted key or an index may go in brackets: {expression}")
                node = node.value
            if not isinstance(node, ast.Name):
                raise MarkerError(f"not a report key: {expression}")
            parts.append(node.id)
            parts.reverse()
            if "" in reports:
                return lookup(reports[""], parts)
            if parts[0] in reports and len(parts) > 1:
                return lookup(reports[parts[0]], parts[1:])
            raise MarkerError(f"no run labelled '{parts[0]}'")
        raise MarkerError(f"not an arithmetic expression: {expression}")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as e:
        raise MarkerError(f"not an expression: {expression} ({e.msg})") from None
    return walk(tree)


def render(value, fmt, old):
    """The value in the format spec, with the typographic minus where the quoted number has one."""
    text = format(value, fmt)
    return text.replace("-", "−") if old.startswith("−") else text


def run(simtrain, scenario, args):
    out = subprocess.run([simtrain, "--log-level", "off", "run", scenario, "--format", "json", *args],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise MarkerError(f"simtrain run {scenario} {' '.join(args)} failed: {out.stderr.strip() or out.stdout[-300:]}")
    return json.loads(out.stdout)


def command_output(simtrain, args):
    out = subprocess.run([simtrain, *shlex.split(args)], capture_output=True, text=True)
    if out.returncode != 0:
        raise MarkerError(f"simtrain {args} failed (exit code {out.returncode}): {out.stderr.strip()[-300:]}")
    return out.stdout.splitlines()


def selected_lines(spec, count):
    """The 1-based line numbers SPEC ('8-10,$') names, in order, of an output COUNT lines long."""
    def number(word):
        n = count if word.strip() == "$" else int(word)
        if not 1 <= n <= count:
            raise MarkerError(f"line {word.strip()} is not in the output ({count} lines)")
        return n
    chosen = []
    try:
        for part in spec.split(","):
            first, _, last = part.partition("-")
            chosen.extend(range(number(first), number(last or first) + 1))
    except ValueError:
        raise MarkerError(f"expected line numbers such as 8-10,$ (found '{spec}')") from None
    return chosen


def render_block(args, spec, output):
    """The block's text: the command, then the chosen lines, with ... where lines are left out."""
    lines, previous = [f"$ simtrain {args}"], None
    for n in selected_lines(spec, len(output)):
        if previous is not None and n != previous + 1:
            lines.append("...")
        lines.append(output[n - 1])
        previous = n
    return "\n".join(lines) + "\n"


def marked_files():
    """Every Markdown file git tracks that holds a marker."""
    listed = subprocess.run(["git", "ls-files", "*.md"], capture_output=True, text=True)
    if listed.returncode == 0:
        names = listed.stdout.split()
    else:  # not a git checkout: every Markdown file outside the build folders
        names = [os.path.join(d, f)[2:] for d, dirs, files in os.walk(".") for f in files if f.endswith(".md")
                 and not d.startswith(("./build", "./.git"))]
    found = []
    for name in sorted(names):
        if os.path.exists(name):
            with open(name, encoding="utf-8") as fh:
                text = fh.read()
            code = fenced(text)
            if outside(code, MARKER.finditer(text)) or outside(code, OUTPUT_MARKER.finditer(text)):
                found.append(name)
    return found


def fenced(text):
    """The spans of fenced code blocks (a marker shown as an example is not a marker)."""
    spans, opening, start, at = [], None, 0, 0
    for line in text.splitlines(keepends=True):
        ticks = len(line) - len(line.lstrip("`"))
        if opening is None and ticks >= 3:
            opening, start = ticks, at
        elif opening is not None and ticks >= opening and not line.strip("`").strip():
            spans.append((start, at + len(line)))
            opening = None
        at += len(line)
    if opening is not None:
        spans.append((start, len(text)))
    return spans


def outside(spans, matches):
    return [m for m in matches if not any(a <= m.start() < b for a, b in spans)]


def process(simtrain, files, write):
    found, blocks = [], []
    for path in files:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        code = fenced(text)
        for m in outside(code, MARKER.finditer(text)):
            line = text.count("\n", 0, m.start()) + 1
            try:
                found.append((path, line, m, *parse(m.group("spec"))))
            except MarkerError as e:
                found.append((path, line, m, e, None, None))
        for m in outside(code, OUTPUT.finditer(text)):
            blocks.append((path, text.count("\n", 0, m.start()) + 1, m))
        if len(outside(code, OUTPUT_MARKER.finditer(text))) != sum(1 for b in blocks if b[0] == path):
            blocks.append((path, 0, None))  # a marker without its block: reported below
    wanted = {spec for *_, runs, _, _ in found if isinstance(runs, dict) for spec in runs.values()}
    commands = {m.group("args") for _, _, m in blocks if m}
    reports, outputs = {}, {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {spec: pool.submit(run, simtrain, *spec) for spec in sorted(wanted)}
        command_futures = {args: pool.submit(command_output, simtrain, args) for args in sorted(commands)}
        for results, pending in ((reports, futures), (outputs, command_futures)):
            for key, future in pending.items():
                try:
                    results[key] = future.result()
                except MarkerError as e:
                    results[key] = e
    problems, stale, edits = [], 0, {}
    for path, line, m, runs, expression, fmt in found:
        where = f"{path}:{line}"
        try:
            if isinstance(runs, MarkerError):
                raise runs
            got = {label: reports[spec] for label, spec in runs.items()}
            for r in got.values():
                if isinstance(r, MarkerError):
                    raise r
            new = render(evaluate(expression, got), fmt, m.group("number"))
        except (MarkerError, ValueError) as e:
            problems.append(f"{where}: {e}")
            continue
        if new != m.group("number"):
            stale += 1
            print(f"{where}: {m.group('number')} -> {new}  ({expression})")
            edits.setdefault(path, []).append((m.start("number"), m.end("number"), new))
    for path, line, m in blocks:
        if m is None:
            problems.append(f"{path}: an <!--output LINES--> marker not followed by a ``` block whose first line is "
                            "'$ simtrain ARGS'")
            continue
        try:
            output = outputs[m.group("args")]
            if isinstance(output, MarkerError):
                raise output
            new = render_block(m.group("args"), m.group("lines"), output)
        except MarkerError as e:
            problems.append(f"{path}:{line}: {e}")
            continue
        if new != m.group("block"):
            stale += 1
            print(f"{path}:{line}: the output of simtrain {m.group('args')} changed:\n{new}")
            edits.setdefault(path, []).append((m.start("block"), m.end("block"), new))
    if write:
        for path, changes in edits.items():
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            for start, end, new in sorted(changes, reverse=True):
                text = text[:start] + new + text[end:]
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{len(found)} quoted numbers from {len(wanted)} runs and {len(blocks)} output blocks from {len(commands)} "
          f"commands: {stale} {'rewritten' if write else 'stale'}, {len(problems)} that cannot be worked out")
    return problems, stale


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("check", "update"):
        sys.exit("usage: readme_numbers.py check|update SIMTRAIN [FILE...]")
    problems, stale = process(sys.argv[2], sys.argv[3:] or marked_files(), sys.argv[1] == "update")
    if problems or (stale and sys.argv[1] == "check"):
        sys.exit(1)


if __name__ == "__main__":
    main()
