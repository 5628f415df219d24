#include "core/heap.hpp"

#include <cstdint>
#include <cstdlib>

// Sanitizers bring their own allocator (GCC says so by __SANITIZE_*__, clang by __has_feature).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SIMTRAIN_OWN_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SIMTRAIN_OWN_ALLOCATOR 1
#endif
#endif

#if defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#endif

namespace sim::core {

void reserve_heap_in_huge_pages(std::size_t bytes)
{
#if defined(__GLIBC__) && !defined(SIMTRAIN_OWN_ALLOCATOR)
  constexpr std::size_t huge_page = std::size_t{2} << 20;
  constexpr std::size_t least = std::size_t{32} << 20;
  constexpr int most = 1 << 30;
  if (bytes < least)
    return;
  // Allocations up to 1 GiB from the heap, and its free top kept (both are otherwise adjusted as the process goes).
  if (mallopt(M_MMAP_THRESHOLD, most) != 1 || mallopt(M_TRIM_THRESHOLD, most) != 1)
    return;
  // Taken from the heap's top, its whole 2 MiB pages advised (not yet written, so not yet backed), and given back: the
  // heap's top spans them, for what comes next.
  auto* block = static_cast<char*>(std::malloc(bytes));
  if (block == nullptr)
    return;
  const std::size_t misaligned = reinterpret_cast<std::uintptr_t>(block) % huge_page;
  const std::size_t skip = misaligned == 0 ? 0 : huge_page - misaligned;
  madvise(block + skip, (bytes - skip) / huge_page * huge_page, MADV_HUGEPAGE); // advice only: refused, ordinary pages
  std::free(block);
#else
  (void)bytes;
#endif
}

} // namespace sim::core
