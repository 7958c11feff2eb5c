# gdb script: the dynamic instruction trace of one call of a function.
#
#   TFN=<function> TSKIP=<calls to skip> TOUT=<file> gdb -batch -x trace.py --args <program...>
#
# Skips TSKIP calls of TFN (warm-up), then single-steps one call (at most
# TLIM instructions, default 400,000) and writes every executed
# instruction, as gdb disassembles it, one per line. Used by run.sh.
import os

import gdb

fn = os.environ["TFN"]
skip = int(os.environ.get("TSKIP", "30"))
limit = int(os.environ.get("TLIM", "400000"))
out_path = os.environ["TOUT"]

gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set disassembly-flavor att")
gdb.execute("break " + fn)
gdb.execute("run")
for _ in range(skip):
    gdb.execute("continue", to_string=True)
gdb.execute("delete")
sp0 = int(gdb.parse_and_eval("$sp"))
text = {}
pcs = []
while len(pcs) < limit:
    pc = int(gdb.parse_and_eval("$pc"))
    if pc not in text:
        text[pc] = gdb.execute("x/i $pc", to_string=True).replace("=>", "  ").strip()
    pcs.append(pc)
    gdb.execute("stepi", to_string=True)
    # Returned from the traced call: the stack pointer is above its value at
    # the breakpoint. gdb sets that after the prologue, so the prologue and the
    # epilogue's last few instructions are left out: a handful per call of 64
    # datagrams, on both sides alike.
    if int(gdb.parse_and_eval("$sp")) > sp0:
        break
with open(out_path, "w") as f:
    for pc in pcs:
        f.write(text[pc] + "\n")
gdb.execute("kill")
