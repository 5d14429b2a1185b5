#!/usr/bin/env bash
# Fails, listing them, when tracked C++ files differ from what clang-format (the repo's
# .clang-format, Debian 12's clang-format 14) makes of them. Fix with: clang-format -i FILE...
# The CUDA sources (.cu, .cuh) are not checked: they predate the check and are not yet formatted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v clang-format >/dev/null || {
  echo "check-format: clang-format is not installed (apt-get install clang-format)" >&2
  exit 2
}
unformatted=()
while IFS= read -r -d '' file; do
  clang-format --dry-run -Werror "$file" >/dev/null 2>&1 || unformatted+=("$file")
done < <(git ls-files -z '*.h' '*.cpp')
if ((${#unformatted[@]})); then
  echo "check-format: ${#unformatted[@]} files are not clang-formatted:" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  exit 1
fi
echo "check-format: every tracked .h and .cpp file is clang-formatted"
