#!/usr/bin/env python3
"""Cut a classic pcap into N files of about equal packet counts, at packet
boundaries (a helper of analyze_archive.py): split_pcap.py IN N OUTDIR."""
import struct, sys, os
src, n, outdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.makedirs(outdir, exist_ok=True)
with open(src, 'rb') as f:
    data = f.read()
hdr = data[:24]
endian = '<' if data[:4] in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1') else '>'
offs = []
i = 24
while i + 16 <= len(data):
    incl = struct.unpack(endian + 'I', data[i + 8:i + 12])[0]
    offs.append(i)
    i += 16 + incl
offs.append(i)
total = len(offs) - 1
for k in range(n):
    a, b = offs[k * total // n], offs[(k + 1) * total // n]
    with open(os.path.join(outdir, 'part-%03d.pcap' % k), 'wb') as o:
        o.write(hdr)
        o.write(data[a:b])
print(total, 'packets into', n, 'files')
