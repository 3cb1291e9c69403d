#!/usr/bin/env python3
"""Writes seed.json: the seed workload (N x N normals in C x C chunks, +1, [::2, ::2], sum) as a
gpuflow graph document using the kernels of examples/plugin/seed_kernels.c.

    python3 make_seed_graph.py [N [C]] > seed.json      (defaults 2000 500)
"""
import json
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
c = int(sys.argv[2]) if len(sys.argv) > 2 else 500
data, tasks = [], []


def add_data(**fields):
    data.append(fields)
    return len(data) - 1


partials = []
for r0 in range(0, n, c):
    for c0 in range(0, n, c):
        rows, cols = min(c, n - r0), min(c, n - c0)
        params = add_data(name=f"params.{r0}.{c0}", text=f"{r0} {c0} {rows} {cols} 42")
        out = add_data(name=f"partial.{r0}.{c0}", size=8)
        tasks.append({"name": f"chunk.{r0}.{c0}", "kernel": "seed.chunk",
                      "inputs": [params], "outputs": [out]})
        partials.append(out)

level = 0
while len(partials) > 1:
    nxt = []
    for i in range(0, len(partials), 2):
        group = partials[i:i + 2]
        out = add_data(name=f"sum.{level}.{i // 2}", size=8)
        tasks.append({"name": f"sum.{level}.{i // 2}", "kernel": "seed.sum",
                      "inputs": group, "outputs": [out]})
        nxt.append(out)
    partials, level = nxt, level + 1

kept = (n + 1) // 2
expected = add_data(name="expected", text=f"{11.0 * kept * kept} {6.0 * kept}")
result = add_data(name="result", size=8, keep=True)
tasks.append({"name": "check", "kernel": "seed.check", "inputs": [partials[0], expected],
              "outputs": [result], "priority": 1})

doc = {"format_version": 1,
       "metadata": [{"key": "workload", "value": f"(normal(10, 1, ({n}, {n})) + 1)[::2, ::2].sum()"},
                    {"key": "chunks", "value": f"{c}x{c}"}],
       "data": data, "tasks": tasks}
json.dump(doc, sys.stdout, indent=1)
print()
