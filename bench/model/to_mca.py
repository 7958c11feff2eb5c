"""Turns a gdb trace (trace.py) into a straight-line llvm-mca input and
counts its memory operations.

    python3 to_mca.py TRACE DATAGRAMS OUT.s

Branches keep their opcode with a dummy target (llvm-mca ignores where they
go: the trace already followed them, so prediction is perfect). Calls and
returns become the store and load they make; push and pop become plain stack
stores and loads (the core's stack engine removes their %rsp updates, which
llvm-mca would otherwise chain). Prints instructions, loads, stores and how
many of those address the stack (spills, callee saves), per datagram.
"""

import re
import sys

trace, datagrams, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lines = []
loads = stores = stack_loads = stack_stores = 0
for raw in open(trace):
    m = re.match(r"\s*0x[0-9a-f]+(?: <[^>]*>)?:\s*(.*)$", raw.rstrip("\n"))
    if not m:
        continue
    ins = re.sub(r"\s*#.*$", "", m.group(1))
    ins = re.sub(r"\s*<[^>]*>", "", ins).replace("\t", " ").strip()
    for prefix in ("bnd ", "notrack "):
        if ins.startswith(prefix):
            ins = ins[len(prefix):]
    if not ins:
        continue
    op = ins.split()[0]
    if op.startswith("call"):
        ins = "movq %rax,-8(%rsp)"
    elif op.startswith("ret"):
        ins = "cmpq $0,(%rsp)"
    elif op.startswith("j"):
        ins = op + " .Lt"
    pushpop = re.match(r"(push|pop)q?\s+(%\w+)$", ins)
    if pushpop:
        reg = pushpop.group(2)
        ins = f"movq {reg},-8(%rsp)" if pushpop.group(1) == "push" else f"movq (%rsp),{reg}"
    lines.append(ins)
    op = ins.split()[0]
    if op.startswith(("j", "prefetch", "lea", "nop")):
        continue
    parts = re.split(r",(?![^(]*\))", ins[len(op):].strip())
    mem = [i for i, p in enumerate(parts) if "(" in p]
    if not mem:
        continue
    stack = any("%rsp" in parts[i] for i in mem)
    writes = (len(parts) - 1) in mem and not op.startswith(("cmp", "test", "bt"))
    reads = not writes or not op.startswith("mov")
    loads += reads
    stores += writes
    stack_loads += reads and stack
    stack_stores += writes and stack
with open(out_path, "w") as f:
    f.write(".Lt:\n" + "\n".join(lines) + "\n")
d = datagrams
print(
    f"instructions {len(lines) / d:.0f}  loads {loads / d:.1f} (stack {stack_loads / d:.1f})"
    f"  stores {stores / d:.1f} (stack {stack_stores / d:.1f})  per datagram"
)
