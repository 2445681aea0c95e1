#!/usr/bin/env bash
# The layering of docs/architecture.md, checked over the `#include "..."` lines of
# src/**/*.{c,h}:
#   table     every folder of src/ is a layer of the table below, and each layer may include
#             only layers below its own
#   layers    a file includes only headers of its own folder and of the folders its layer
#             may include (so never a layer above its own)
#   internal  a folder's internal headers (`*_internal.h`, and the PRIVATE ones below) are
#             included only from that folder (and, for PRIVATE ones, the folders listed)
#   cycles    the folders' include graph has no cycle
#   can-fail  the checks above, run on a small tree with one violation of each planted,
#             report every one of them (so this script cannot pass by checking nothing)
# Each violation is printed as file:line: rule; then one "N passed, N failed" line over the
# checks, and a non-zero exit status if any failed. `tests/check_layers.sh DIR` checks the
# tree DIR (instead of src) and skips the can-fail check.
set -u
cd "$(dirname "$0")/.."

# The table of docs/architecture.md, bottom to top: a layer (a folder of src/), then the
# layers it may include besides its own. Keep the two the same.
LAYERS='
core
text     core
data     core text
kernels  core
io       core
model    core kernels io
optim    core kernels io model
train    core data kernels io model optim
bench    core kernels
tasks    core text io model optim train
serve    core text io model tasks
cli      core text data kernels io model optim train bench tasks serve
'
# Headers private to their folder besides the `*_internal.h` ones: a header, then the other
# folders that may include it. The CPU backend's GEMMs are behind kernels/kernels.h; the
# peaks of bench/ measure them, and `bert bench` (cli/cmd_bench.c) names the GEMM library.
PRIVATE='
kernels/cpu/sgemm.h      bench cli
kernels/cpu/gemm_half.h  bench
kernels/cpu/gemm_int8.h  bench
kernels/cpu/amx.h   bench
kernels/cpu/cpu_names.h  -
kernels/backend_functions.h -
model/bert_views.h       -
'

# check ROOT: prints violations and one "RESULT <check> <violations>" line per check.
check() {
    local root=${1%/} files
    mapfile -d '' files < <(find "$root" -type f \( -name '*.c' -o -name '*.h' \) -print0 2>/dev/null | LC_ALL=C sort -z)
    if [ ${#files[@]} -eq 0 ]; then echo "$root: no .c or .h files"; echo "RESULT table 1"; return; fi
    awk -v root="$root" -v layers="$LAYERS" -v private="$PRIVATE" '
function fail(check, msg) { n_bad[check]++; print msg }
function folder_of(path,    rel) {   # src/model/bert.c -> model
    rel = substr(path, length(root) + 2)
    return index(rel, "/") ? substr(rel, 1, index(rel, "/") - 1) : ""
}
function node(f) { if (!(f in is_node)) { is_node[f] = 1; nodes[++n_nodes] = f } }
function visit(u,    v, i, path, k, to) {   # depth-first; a grey successor closes a cycle
    colour[u] = 1; stack[++depth] = u
    for (i = 1; i <= n_nodes; i++) {
        v = nodes[i]
        if (!((u, v) in edge)) continue
        if (colour[v] == 1) {
            for (k = depth; stack[k] != v; k--) ;
            for (path = ""; k <= depth; k++) {
                to = k < depth ? stack[k + 1] : v
                path = path (path == "" ? "" : ", ") stack[k] " -> " to " (" edge[stack[k], to] ")"
            }
            fail("cycles", "cycles: folders include each other: " path)
        } else if (colour[v] == 0) visit(v)
    }
    depth--; colour[u] = 2
}
BEGIN {
    split("table layers internal cycles", checks, " ")
    n = split(layers, rows, "\n")
    for (r = 1; r <= n; r++) {
        m = split(rows[r], f, " ")
        if (m == 0) continue
        order[f[1]] = ++n_layers; allowed_list[f[1]] = ""
        for (i = 2; i <= m; i++) {
            if (!(f[i] in order)) fail("table", "tests/check_layers.sh: table: " f[1] " may include " f[i] ", which is not a layer below it")
            allowed[f[1], f[i]] = 1; allowed_list[f[1]] = allowed_list[f[1]] " " f[i]
        }
    }
    n = split(private, rows, "\n")
    for (r = 1; r <= n; r++) {
        m = split(rows[r], f, " ")
        if (m == 0) continue
        priv[f[1]] = 1
        for (i = 2; i <= m; i++) priv_ok[f[1], f[i]] = 1
    }
    for (a = 1; a < ARGC; a++) {   # every file, empty ones too, is in a layer folder
        folder = folder_of(ARGV[a])
        if (!(folder in order) && !(folder in unknown)) {
            unknown[folder] = 1
            fail("table", ARGV[a] ": table: " (folder == "" ? "a file outside the layer folders" : "folder " folder "/ is not a layer of the table"))
        }
    }
}
FNR == 1 { folder = folder_of(FILENAME) }
/^[ \t]*#[ \t]*include[ \t]*"/ {
    inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
    to = index(inc, "/") ? substr(inc, 1, index(inc, "/") - 1) : folder
    where = FILENAME ":" FNR
    if (to != folder) {
        if (!((folder, to) in edge)) { edge[folder, to] = where; node(folder); node(to) }
        if (!(to in order))
            fail("layers", where ": layers: includes \"" inc "\", and " to "/ is not a layer")
        else if ((folder in order) && !((folder, to) in allowed))
            fail("layers", where ": layers: includes \"" inc "\": " \
                 (order[to] > order[folder] ? "a layer above its own (" folder " is below " to ")" : folder " is not to include " to) \
                 "; " folder " may include" (allowed_list[folder] == "" ? " nothing but itself" : ":" allowed_list[folder]))
        if (inc ~ /_internal\.h$/)
            fail("internal", where ": internal: includes \"" inc "\", which is for " to "/ alone")
        else if ((inc in priv) && !((inc, folder) in priv_ok))
            fail("internal", where ": internal: includes \"" inc "\", which is private to " to "/")
    }
}
END {
    for (i = 1; i <= n_nodes; i++) if (colour[nodes[i]] == 0) visit(nodes[i])
    for (c = 1; c <= 4; c++) print "RESULT " checks[c] " " (n_bad[checks[c]] + 0)
}' "${files[@]}"
}

passed=0; failed=0
tally() {  # the output of check: prints it; counts the checks
    local out=$1 name bad
    grep -v '^RESULT ' <<<"$out"
    while read -r _ name bad; do
        if [ "$bad" -eq 0 ]; then echo "ok   $name"; passed=$((passed + 1))
        else echo "FAIL $name ($bad)"; failed=$((failed + 1)); fi
    done < <(grep '^RESULT ' <<<"$out")
}

root=${1:-src}
out=$(check "$root")
if ! grep -q '^RESULT cycles ' <<<"$out"; then grep -v '^RESULT ' <<<"$out"; echo "0 passed, 1 failed"; exit 1; fi
tally "$out"

if [ $# -eq 0 ]; then   # can-fail: one planted violation of each check
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp"/{core,io,model,tasks,kernels,extra}
    echo '#include "cli/commands.h"' >"$tmp/core/up.c"             # layers: a layer above
    echo '#include "model/config.h"' >"$tmp/io/x.h"                # layers + cycles: io -> model
    echo '#include "io/x.h"' >"$tmp/model/config.h"                # ... -> io
    echo '#include "model/bert_internal.h"' >"$tmp/tasks/t.c"      # internal
    echo '#include "kernels/cpu/sgemm.h"' >"$tmp/model/m.c"            # internal (PRIVATE)
    : >"$tmp/extra/e.c"                                            # table: not a layer
    got=$(check "$tmp")
    want="RESULT table 1 RESULT layers 2 RESULT internal 2 RESULT cycles 1"
    if [ "$(grep '^RESULT ' <<<"$got" | tr '\n' ' ')" = "$want " ]; then echo "ok   can-fail"; passed=$((passed + 1))
    else
        echo "FAIL can-fail (the planted violations, 1 table, 2 layers, 2 internal, 1 cycle, were not all found)"
        sed 's/^/    /' <<<"$got"; failed=$((failed + 1))
    fi
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
