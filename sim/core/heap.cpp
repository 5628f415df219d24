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
#include <unistd.h>
#endif

namespace sim::core {

void reserve_heap_in_huge_pages(std::size_t bytes)
{
#if defined(__GLIBC__) && !defined(SIMTRAIN_OWN_ALLOCATOR)
  constexpr std::uintptr_t huge_page = std::uintptr_t{2} << 20;
  constexpr std::size_t least = std::size_t{32} << 20;
  constexpr int most = 1 << 30;
  if (bytes < least)
    return;
  // Allocations up to 1 GiB from the heap, and its free top kept (both are otherwise adjusted as the process goes).
  if (mallopt(M_MMAP_THRESHOLD, most) != 1 || mallopt(M_TRIM_THRESHOLD, most) != 1)
    return;
  // Taken and given back at once: the heap's top now spans it, its pages not yet written (so not yet backed).
  void* block = std::malloc(bytes);
  if (block == nullptr)
    return;
  const auto from = reinterpret_cast<std::uintptr_t>(block);
  std::free(block);
  const auto top = reinterpret_cast<std::uintptr_t>(sbrk(0));
  const std::uintptr_t begin = (from + huge_page - 1) / huge_page * huge_page;
  const std::uintptr_t end = top / huge_page * huge_page;
  if (from < top && begin < end)                                         // (from the heap, not a mapping of its own)
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE); // advice only: refused, ordinary pages
#else
  (void)bytes;
#endif
}

} // namespace sim::core
