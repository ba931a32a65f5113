#!/usr/bin/env python3
"""Lists the longest functions of C++ sources: a function is a definition that starts at column 0
and ends at the first later line that is exactly "}" (the house style: clang-format, 2-space
indent). Counts the lines from its signature to its closing brace.

Usage: scripts/function_lengths.py [--max N] [--top K] FILE_OR_DIR...
Exits 1 when --max is given and a function is longer than N lines (listing those)."""
import argparse
import os
import re
import sys

START = re.compile(r'^[A-Za-z_~][^;#/]*\)\s*(const\s*)?(noexcept\s*)?(override\s*)?(->\s*[^{]+)?\{\s*$')


def functions(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        lines = f.read().split('\n')
    i = 0
    while i < len(lines):
        line = lines[i]
        begin = None
        if START.match(line) and not line.startswith(('namespace', 'class ', 'struct ', 'enum ', 'union ')):
            begin = i
        elif (re.match(r'^[A-Za-z_~]', line) and not line.rstrip().endswith((';', '{', '}')) and
              not line.startswith(('namespace', 'class ', 'struct ', 'enum ', 'union ', 'template', 'using ', 'typedef'))):
            # a signature continued on the next lines (parameters, an initializer list), ending with "{"
            j = i + 1
            while j < len(lines) and j < i + 12 and lines[j].startswith(' ') and not lines[j].rstrip().endswith(';'):
                if lines[j].rstrip().endswith('{'):
                    begin = i
                    break
                j += 1
        if begin is None:
            i += 1
            continue
        end = begin + 1
        while end < len(lines) and lines[end] != '}':
            if re.match(r'^[A-Za-z_~]', lines[end]) and lines[end] != '}':
                break  # a new top-level construct: not a function body we can measure
            end += 1
        if end < len(lines) and lines[end] == '}':
            name = re.sub(r'\s+', ' ', line.strip())[:100]
            yield (end - begin + 1, path, begin + 1, name)
            i = end + 1
        else:
            i += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--max', type=int)
    ap.add_argument('--top', type=int, default=10)
    ap.add_argument('paths', nargs='+')
    a = ap.parse_args()
    found = []
    for p in a.paths:
        files = [p] if os.path.isfile(p) else [os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs if f.endswith('.cpp')]
        for f in sorted(files):
            found.extend(functions(f))
    found.sort(reverse=True)
    for n, path, line, name in found[:a.top]:
        print(f'{n:5d}  {path}:{line}  {name}')
    if a.max is not None:
        over = [x for x in found if x[0] > a.max]
        if over:
            print(f'{len(over)} function(s) longer than {a.max} lines', file=sys.stderr)
            return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
