#!/usr/bin/env bash
# The README's quickstart must be the compiled example's [quickstart] region, verbatim (minus two spaces of indent).
set -euo pipefail
root=$1
example=$(sed -n '/\[quickstart\]/,/\[quickstart\]/p' "$root/examples/quickstart.cpp" | sed '1d;$d' | sed 's/^  //')
readme=$(sed -n '/^## Quickstart/,/^```$/p' "$root/README.md" | sed -n '/^```cpp$/,/^```$/p' | sed '1d;$d')
if [[ "$example" != "$readme" ]]; then
  echo "README quickstart differs from examples/quickstart.cpp:"; diff <(echo "$example") <(echo "$readme"); exit 1
fi
lines=$(echo "$readme" | wc -l)
[[ $lines -le 15 ]] || { echo "README quickstart has $lines lines (max 15)"; exit 1; }
echo "README quickstart in sync ($lines lines)"
