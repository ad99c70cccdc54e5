#!/usr/bin/env bash
# Installs the pinned coding-agent CLIs the real-CLI tests (tests/real/) run, into the git-ignored .npm-agents/.
# Idempotent: does nothing when the pinned versions are there. Never fails the build: when npm or the registry is
# missing it says so, records why in .npm-agents/install-status.txt and exits 0 — the real-CLI tests then skip,
# naming that reason (they never pass silently).
#
# Usage: scripts/install-agents.sh [--check]     --check: only report what is installed (exit 1 if something is missing)
set -uo pipefail
cd "$(dirname "$0")/.."

prefix=.npm-agents
status_file="$prefix/install-status.txt"

# Installed now. @mariozechner/pi-coding-agent 0.73.1 is the last release under that name and runs on Node >= 20.6;
# its successor @earendil-works/pi-coding-agent 1.x needs Node >= 22.19 and is added only on such a Node.
agents=("@mariozechner/pi-coding-agent@0.73.1")
optional_node22=("@earendil-works/pi-coding-agent@1.6.0")   # needs Node >= 22.19.0
# Pinned for later (their providers do not exist yet; not installed, to keep CI lean):
#   @anthropic-ai/claude-code@2.1.332   (Node >= 22)
#   @openai/codex@0.171.0               (Node >= 16; the npm package ships the native binary)
#   @google/gemini-cli@0.61.0           (Node >= 20)

note() { echo "install-agents: $*"; }
record() {  # record <line>: the reason the tests print when they skip
  mkdir -p "$prefix"
  echo "$*" >"$status_file"
  note "$*"
}

# The version of an installed package, or nothing.
installed_version() {
  local pkg=$1 file="$prefix/node_modules/$1/package.json"
  [[ -f "$file" ]] || return 0
  node -e 'process.stdout.write(String(require(process.argv[1]).version))' "$PWD/$file" 2>/dev/null || true
}

node_at_least() {  # node_at_least MAJOR MINOR
  node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>+process.argv[1]||(a==+process.argv[1]&&b>=+process.argv[2])?0:1)' "$1" "$2" 2>/dev/null
}

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  record "not installed: node/npm not found on PATH (Debian: apt-get install nodejs npm)"
  exit 0
fi

wanted=("${agents[@]}")
if node_at_least 22 19; then
  wanted+=("${optional_node22[@]}")
else
  note "node $(node --version) < 22.19: skipping ${optional_node22[*]} (needs Node >= 22.19.0)"
fi

missing=()
for spec in "${wanted[@]}"; do
  pkg=${spec%@*} ver=${spec##*@}
  have=$(installed_version "$pkg")
  if [[ "$have" == "$ver" ]]; then note "$pkg $ver is installed"; else missing+=("$spec"); fi
done

if [[ "${1:-}" == "--check" ]]; then
  [[ ${#missing[@]} -eq 0 ]] && exit 0
  note "missing: ${missing[*]}"
  exit 1
fi

if [[ ${#missing[@]} -eq 0 ]]; then
  record "ok: ${wanted[*]} (node $(node --version))"
  exit 0
fi

note "installing ${missing[*]} into $prefix/"
mkdir -p "$prefix"
log="$prefix/npm-install.log"
# Bounded: a registry that hangs must not eat the CI budget. No audit/fund requests; exact versions.
if timeout 900 npm install --prefix "$prefix" --save-exact --no-audit --no-fund --no-progress --loglevel=error \
     --fetch-retries=2 --fetch-timeout=60000 "${missing[@]}" >"$log" 2>&1; then
  for spec in "${wanted[@]}"; do
    pkg=${spec%@*} ver=${spec##*@}
    if [[ "$(installed_version "$pkg")" != "$ver" ]]; then
      record "not installed: npm finished but $pkg is not at $ver (see $log)"
      exit 0
    fi
  done
  record "ok: ${wanted[*]} (node $(node --version))"
  exit 0
fi

rc=$?
reason="npm install failed (exit $rc)"
[[ $rc -eq 124 ]] && reason="npm install timed out after 900 s"
if grep -qiE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|network|socket hang up' "$log"; then
  reason="npm registry unreachable ($(npm config get registry 2>/dev/null)); $reason"
fi
tail -n 20 "$log" | sed 's/^/  npm: /'
record "not installed: $reason; see $log"
exit 0
