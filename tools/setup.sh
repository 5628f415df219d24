# Shared by tools/run and tools/test (sourced, not run): installs the Debian packages simtrain needs (only the
# missing ones) and builds a CMake preset (configuring it only the first time).
set -euo pipefail

SIMTRAIN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIMTRAIN_PACKAGES=(g++ cmake ninja-build pkg-config libsimgrid-dev libboost-graph-dev nlohmann-json3-dev
                   libspdlog-dev libfmt-dev catch2 libcli11-dev libtomlplusplus-dev
                   libprotobuf-dev protobuf-compiler libyaml-cpp-dev)

say() { echo "simtrain: $*" >&2; }

install_packages() {
  local missing=()
  for p in "${SIMTRAIN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    say "Debian packages present"
    return
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { say "need root or sudo to install: ${missing[*]}"; exit 1; }
    sudo=sudo
  fi
  say "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# build_preset PRESET [TARGET...]
build_preset() {
  local preset=$1
  shift
  local dir="$SIMTRAIN_ROOT/build"
  [ "$preset" = release ] || dir="$SIMTRAIN_ROOT/build/$preset"
  cd "$SIMTRAIN_ROOT"
  if [ ! -f "$dir/build.ninja" ]; then
    say "configuring ($preset) in ${dir#$SIMTRAIN_ROOT/}"
    cmake --preset "$preset" >/dev/null
  fi
  say "building ($preset)"
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  local status=0
  cmake --build --preset "$preset" "${targets[@]}" -- -j"$(nproc)" > "$dir/build.log" 2>&1 || status=$?
  grep -vE '^\[[0-9]+/[0-9]+\]' "$dir/build.log" || true
  [ "$status" -eq 0 ] || { say "build ($preset) failed"; exit 1; }
}
