#!/usr/bin/env bash
# Installs what agenthost needs to build and test on Debian 12, and nothing when all of it is there.
# Idempotent; run as root (or with sudo available). Usage: scripts/setup.sh [--with-fuzz]
set -euo pipefail

packages=(g++ cmake make libboost1.81-dev nlohmann-json3-dev libspdlog-dev libgtest-dev googletest libbenchmark-dev
          libsimdjson-dev)
if [[ "${1:-}" == "--with-fuzz" ]]; then packages+=(clang libclang-rt-14-dev); fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then missing+=("$p"); fi
done
# libboost1.81-dev conflicts with the default 1.74 headers; remove those only when 1.81 still has to be installed.
conflict=()
if printf '%s\n' "${missing[@]}" | grep -qx libboost1.81-dev &&
   dpkg-query -W -f='${Status}' libboost1.74-dev 2>/dev/null | grep -q "install ok installed"; then
  conflict=(libboost1.74-dev)
fi

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all dependencies are installed"
  exit 0
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
if [[ ${#conflict[@]} -gt 0 ]]; then "${sudo_cmd[@]}" apt-get remove -y -qq "${conflict[@]}"; fi
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
