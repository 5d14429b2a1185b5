#!/bin/sh
# Links the objects of one CPU ISA variant into one relocatable object whose only global
# functions are the variant's entry points. See Note [CPU ISA variants] in kernels/cpu_isa.cpp.
#
# Usage: localize_isa_object.sh LD OBJCOPY READELF OUTPUT KEEP_REGEX OBJECT...
#   KEEP_REGEX (grep -E) matches the mangled names of the functions that stay global.
set -eu
ld=$1 objcopy=$2 readelf=$3 out=$4 keep=$5
shift 5
tmp="$out.tmp"
list="$out.localize"
weak="$out.weaken"

# --force-group-allocation dissolves the COMDAT groups: the variant's copies of inline and
# template functions become plain symbols that the final link can no longer merge with the
# baseline's copies of the same name.
"$ld" -r --force-group-allocation -o "$tmp" "$@"

# Every defined global or weak function, and every vtable (VTT, construction vtable): those hold
# the variant's function addresses, so a global one could hand variant code to baseline callers.
"$readelf" -sW "$tmp" | awk -v keep="$keep" '
  $7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") && $8 != "" {
    is_vtable = $4 == "OBJECT" && $8 ~ /^_ZT[VTC]/
    if (($4 == "FUNC" || is_vtable) && $8 !~ keep) print $8
  }' | sort -u >"$list"

# Other data stays global, so that each object (function-local statics and their guard
# variables, template static members, inline variables, typeinfo) remains one object
# process-wide. Those came in COMDAT groups, or as STB_GNU_UNIQUE, which the final link merges
# with the baseline's copies; out of their groups they would be duplicate definitions, so they
# become weak: the final link then binds every copy's references to one definition.
"$readelf" -sW "$tmp" | awk '
  $7 != "UND" && ($5 == "GLOBAL" || $5 == "UNIQUE") && $8 != "" &&
  ($4 == "OBJECT" || $4 == "TLS") && $8 !~ /^_ZT[VTC]/ { print $8 }' | sort -u >"$weak"

kept=$("$readelf" -sW "$tmp" |
  awk -v keep="$keep" '$4 == "FUNC" && $7 != "UND" && $5 == "GLOBAL" && $8 ~ keep' | wc -l)
if [ "$kept" -eq 0 ]; then
  echo "localize_isa_object.sh: no entry point matches '$keep' in $*" >&2
  exit 1
fi

"$objcopy" --localize-symbols="$list" --weaken-symbols="$weak" "$tmp" "$out"
rm -f "$tmp"
