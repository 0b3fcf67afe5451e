#!/bin/sh
# doc_examples.sh CC SCRATCH — docs/architecture.md's worked examples ("How to add one") are
# built against today's interfaces, so they cannot drift again:
#   - every ```c block that follows a line "`src/DIR/NAME.c` (new):" is extracted and compiled
#     as that file would be (C11, -Wall -Wextra -Werror, its folder's headers first);
#   - every ```c block that follows a line naming a table file (`src/DIR/NAME_table.c`) is a
#     copy of that table's row macro with the example's row added at the end: its rows but the
#     last must be the table's rows today, in order (a policy's or mode's number is its row).
# Fails when a document has no such example (the check must not pass by finding nothing).
set -u
cc=$1
mkdir -p "$2/docex-$$" || exit 1
tmp=$(cd "$2/docex-$$" && pwd)
trap 'rm -rf "$tmp"' EXIT
root=$(cd "$(dirname "$0")/.." && pwd)
doc=$root/docs/architecture.md
failed=0 files=0 tables=0
# split the document: each extracted block into $tmp/N, its path into $tmp/N.path
awk -v out="$tmp" '
    /^`src\/[^`]*\.c`/ { path = $0; sub(/^`/, "", path); sub(/`.*/, "", path); next }
    /^```c$/ && path != "" { n++; file = out "/" n; print path > (file ".path"); close(file ".path"); inblock = 1; next }
    /^```$/ && inblock { inblock = 0; path = ""; close(file); next }
    inblock { print > file }
' "$doc"
for f in "$tmp"/*.path; do
    [ -e "$f" ] || continue
    block=${f%.path} path=$(cat "$f")
    case $path in
    *_table.c)
        tables=$((tables + 1))
        sed -n 's/^ *X(\([a-z_0-9]*\)).*/\1/p' "$block" | sed '$d' >"$block.rows"
        macro=$(sed -n 's/^#define \([A-Z_]*\)(X).*/\1/p' "$block")
        sed -n "/^#define $macro(X)/,/^\$/p" "$root/$path" | sed -n 's/^ *X(\([a-z_0-9]*\)).*/\1/p' >"$block.now"
        if cmp -s "$block.rows" "$block.now"; then echo "ok: $path's rows as the example shows them ($(wc -l <"$block.now") before the new one)"
        else echo "FAIL: $doc shows $path's rows as $(tr '\n' ' ' <"$block.rows"), the table has $(tr '\n' ' ' <"$block.now")"; failed=$((failed + 1)); fi ;;
    *)
        files=$((files + 1))
        if "$cc" -std=c11 -Wall -Wextra -Werror -D_DEFAULT_SOURCE -iquote "$root/$(dirname "$path")" -I "$root/src" \
            -I "$root/include" -x c -c "$block" -o "$block.o" 2>"$block.err"; then echo "ok: $path compiles"
        else echo "FAIL: $path as docs/architecture.md shows it does not compile:"; cat "$block.err"; failed=$((failed + 1)); fi ;;
    esac
done
[ "$files" -ge 2 ] && [ "$tables" -ge 2 ] || { echo "FAIL: found $files example files and $tables tables (want 2 and 2)"; failed=$((failed + 1)); }
echo "$((files + tables - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
