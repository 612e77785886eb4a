#!/usr/bin/env bash
# Debian packages the namespace and shaping tests need (iproute2 for ip/tc, iperf3
# for the side-by-side benchmark). Needs root; without it, says what is missing.
set -euo pipefail
pkgs=(iproute2 iperf3 iptables ethtool procps)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "system-deps: not root; missing Debian packages: ${missing[*]} (netns tests will be skipped)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
