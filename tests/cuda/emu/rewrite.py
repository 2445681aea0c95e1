#!/usr/bin/env python3
"""A CUDA backend file (.cu) as C++ for the host emulator (runtime.cpp): each launch
`kernel<<<grid, block[, shared[, stream]]>>>(args)` becomes
`emu_run(emu_config(grid, block[, shared[, stream]]), "kernel", &kernel, [&] { kernel(args); })`, and an
`extern __shared__` array the running block's dynamic shared memory. Nothing else changes: the
includes find the emulator's stand-ins for the CUDA headers first (tests/cuda/emu/include).
Usage: rewrite.py IN.cu OUT.cpp"""
import re
import sys

src, dst = sys.argv[1], sys.argv[2]
text = open(src).read()
text, shared = re.subn(r'extern __shared__ (?:__align__\(\d+\) )?(\w[\w ]*?)\s*(\w+)\[\];',
                       r'\1 *\2 = (\1 *)emu_shared();', text)
launch = re.compile(r'(\w+)(<[\w\s,:]*>)?<<<')
out, at, count = [], 0, 0
while True:
    m = launch.search(text, at)
    if not m:
        out.append(text[at:])
        break
    out.append(text[at:m.start()])
    close = text.index('>>>', m.end())
    args_start = close + 3
    if text[args_start] != '(':
        sys.exit(f'{src}: a launch without its arguments at offset {m.start()}')
    depth, p = 0, args_start
    while True:
        depth += {'(': 1, ')': -1}.get(text[p], 0)
        if depth == 0:
            break
        p += 1
    kernel = m.group(1) + (m.group(2) or '')
    out.append(f'emu_run(emu_config({text[m.end():close]}), "{m.group(1)}", &{kernel}, '
               f'[&] {{ {kernel}{text[args_start:p + 1]}; }})')
    at, count = p + 1, count + 1
open(dst, 'w').write(f'#line 1 "{src}"\n' + ''.join(out))
print(f'{src}: {count} launches, {shared} dynamic shared arrays', file=sys.stderr)
