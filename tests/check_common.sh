# What the tests/check_*.sh scripts share (sourced first): the repository root as the working
# folder ($repo), a scratch folder removed at exit ($root), and the checks counted: ok WHAT,
# fail WHAT [DETAILS] (the details indented), check WHAT COMMAND... (ok or fail
# by its exit status, its output the details), then summary (the "N passed, N failed" line and
# the exit status).
set -u
cd "$(dirname "${BASH_SOURCE[1]}")/.." || exit 1
repo=$PWD
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "  ok   $1"; }
fail() { failed=$((failed + 1)); echo "  FAIL $1"; [ $# -lt 2 ] || printf '%s\n' "$2" | sed 's/^/    /'; }
check() {
    local what=$1; shift
    if "$@" > "$root/out" 2>&1; then ok "$what"; else fail "$what" "$(cat "$root/out")"; fi
}
summary() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
