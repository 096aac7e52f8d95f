#!/usr/bin/env bash
# Install what apptune needs on a Debian 12 machine, only what is missing.
# Idempotent: a second run installs nothing and prints "nothing to install".
#   bash ci/bootstrap.sh --print-apt-packages   the Debian packages it installs, one a line
set -euo pipefail
shopt -s inherit_errexit  # a failing $(command) stops the script too
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# The Debian packages: the harness's and its environments' (ci/apt-packages.txt), and those
# the recipes name (requires.debian), read with python3's standard library alone: the
# virtualenv with PyYAML does not exist yet.
apt_packages() {
  local recipes
  recipes=$(python3 -m apptune.core.builds.syspackages build-recipes)
  { grep -vE '^\s*(#|$)' ci/apt-packages.txt; [ -z "$recipes" ] || echo "$recipes"; } | sort -u
}
if [ "${1:-}" = --print-apt-packages ]; then
  apt_packages
  exit 0
fi

# 1. deb-src, derived from the machine's own Debian source list (no host names here).
# APPTUNE_BOOTSTRAP_APT=0: only the virtualenv (a cluster's login node, where toolchains
# and MPI come from modules and apt is not ours to run; .github/workflows/nightly.yml).
if [ "${APPTUNE_BOOTSTRAP_APT:-1}" = 0 ]; then
  echo "bootstrap: APPTUNE_BOOTSTRAP_APT=0: apt packages left to the site"
elif ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  python3 "$here/ci/derive_deb_src.py" /etc/apt/sources.list.d/apptune-deb-src.sources
  need_update=1
fi

# 2. apt packages that are missing.
wanted=()
if [ "${APPTUNE_BOOTSTRAP_APT:-1}" != 0 ]; then
  packages=$(apt_packages)
  mapfile -t wanted <<< "$packages"
fi
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ] || [ -n "${need_update:-}" ]; then
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -q
fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "bootstrap: installing apt packages: ${missing[*]}"
  as_root apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "bootstrap: apt packages: nothing to install"
fi

# 3. The virtualenv with apptune (editable) and its pinned dependencies.
venv="${APPTUNE_VENV:-$here/.venv}"
stamp="$venv/.apptune-installed"
want=$(cat pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "bootstrap: virtualenv $venv is current: nothing to install"
else
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  log="$venv/pip-install.log"
  echo "bootstrap: installing apptune and its dependencies into $venv (log: $log)"
  if ! { "$venv/bin/python" -m pip install --upgrade pip &&
         "$venv/bin/python" -m pip install -e ".[test,mkl]"; } > "$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "bootstrap: pip install failed (full log: $log)" >&2
    exit 1
  fi
  echo "$want" > "$stamp"
  echo "bootstrap: virtualenv $venv ready"
fi
