#!/bin/sh
# Fails (exit 1, listing them) if any given object file defines a mutable global: a symbol
# in .bss/.data (nm types b B d D), a common symbol (C) or a small-data symbol (g G s S).
# Const data (nm r R) and code are fine.
#
# Compile the objects without PIC (-fno-pic): under PIC, const tables that hold pointers
# (the kernel tables) go to .data.rel.ro, which nm also reports as 'd' although it is
# read-only after relocation.  Without PIC they are plain .rodata, so every b/B/d/D left is
# a non-const static or global.
#
# usage: check_no_globals.sh NM OBJECT...
set -eu
nm=$1
shift
out=$("$nm" -A "$@")
bad=$(printf '%s\n' "$out" | awk '$(NF-1) ~ /^[bBdDCgGsS]$/ { print "  " $0 }')
if [ -n "$bad" ]; then
    echo "mutable global state in the native core (nm types b/B/d/D/C/g/G/s/S):"
    printf '%s\n' "$bad"
    exit 1
fi
echo "ok   no mutable globals in $# objects ($nm)"
