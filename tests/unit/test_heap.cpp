#include "core/heap.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace {

// Bytes of the heap's mappings advised to use huge pages ("hg" among their VmFlags in /proc/self/smaps).
std::size_t heap_advised_bytes()
{
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool heap = false;
  std::size_t size = 0;
  std::size_t advised = 0;
  while (std::getline(smaps, line)) {
    const char first = line.empty() ? ' ' : line[0];
    if ((first >= '0' && first <= '9') || (first >= 'a' && first <= 'f')) {
      // a mapping's first line: its address range in lower-case hex (a field's name starts with a capital)
      heap = line.find("[heap]") != std::string::npos;
      std::size_t from = 0;
      std::size_t to = 0;
      char dash = 0;
      std::istringstream(line) >> std::hex >> from >> dash >> to;
      size = to - from;
    } else if (heap && line.rfind("VmFlags:", 0) == 0 && line.find(" hg") != std::string::npos) {
      advised += size;
    }
  }
  return advised;
}

} // namespace

TEST_CASE("a large run's heap grows at once in huge pages, and what it holds works as any allocation")
{
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  constexpr std::size_t mib = std::size_t{1} << 20;
  const std::size_t before = heap_advised_bytes();
  sim::core::reserve_heap_in_huge_pages(16 * mib); // below its threshold: nothing
  CHECK(heap_advised_bytes() == before);
  sim::core::reserve_heap_in_huge_pages(96 * mib);
  // The whole 2 MiB pages inside the block given back: at least 96 MiB less one page at each end.
  CHECK(heap_advised_bytes() >= before + 92 * mib);
#endif
  // What is allocated there afterwards is ordinary memory.
  auto* bytes = static_cast<unsigned char*>(std::malloc(40 << 20));
  REQUIRE(bytes != nullptr);
  for (std::size_t i = 0; i < (std::size_t{40} << 20); i += 4096)
    bytes[i] = static_cast<unsigned char>(i / 4096);
  CHECK(bytes[4096 * 7] == 7);
  std::free(bytes);
}
