#!/usr/bin/env bash
# Builds ASTRA-sim's analytical backends (astra-sim c459ab6, 2025-08-11: the newest commit whose submodule pins
# could all be checked out here) with Debian's protobuf, fmt, spdlog and yaml-cpp instead of the submodules that
# bundle them. Needs network access to GitHub; not part of the test suite.
#   tools/astra-sim/build.sh [DIR]   (default: build/astra-sim); prints the folder of the binaries
# Measured on this project's 2-core machine from the same commits (fetched as snapshots): 1 min 14 s.
set -euo pipefail
dir=${1:-build/astra-sim}
apt-get install -y -qq cmake g++ git protobuf-compiler libprotobuf-dev libyaml-cpp-dev libfmt-dev libspdlog-dev >/dev/null
if [ ! -d "$dir/.git" ]; then
  git clone -q https://github.com/astra-sim/astra-sim.git "$dir"
  git -C "$dir" checkout -q c459ab61193bdb5b663ab61d2e923314dae8a77f
  for sub in extern/graph_frontend/chakra extern/network_backend/analytical extern/remote_memory_backend/analytical; do
    git -C "$dir" submodule update -q --init "$sub"
  done
fi
# The helper submodules, as the Debian packages.
echo 'find_package(fmt REQUIRED GLOBAL)' >"$dir/extern/helper/fmt/CMakeLists.txt"
echo 'find_package(spdlog REQUIRED GLOBAL)' >"$dir/extern/helper/spdlog/CMakeLists.txt"
echo 'find_package(yaml-cpp REQUIRED GLOBAL)' >"$dir/extern/network_backend/analytical/extern/yaml-cpp/CMakeLists.txt"
(cd "$dir/extern/graph_frontend/chakra/schema/protobuf" && protoc et_def.proto --proto_path=. --cpp_out=.)
mkdir -p "$dir/build/astra_analytical/build"
cd "$dir/build/astra_analytical/build"
cmake .. -DBUILDTARGET=all -DCMAKE_BUILD_TYPE=Release --compile-no-warning-as-error >/dev/null
cmake --build . -j "$(nproc)" >/dev/null
echo "$(pwd)/bin"
