#include "support.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

namespace fuzz {

std::filesystem::path data_dir()
{
  return SIMTRAIN_SOURCE_DIR;
}

std::filesystem::path write_input(const std::uint8_t* data, std::size_t size, const std::string& extension)
{
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    const std::filesystem::path shm = "/dev/shm";
    const auto base = std::filesystem::is_directory(shm, ec) ? shm : std::filesystem::temp_directory_path();
    auto d = base / ("simtrain-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  auto file = dir / ("input" + extension);
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return file;
}

void fail(const char* what)
{
  std::fprintf(stderr, "fuzz: an error other than bad input escaped: %s\n", what);
  std::abort();
}

} // namespace fuzz
