// Vectors for a step's largest arrays (its task graph, the replay's timeline), in 2 MiB pages where Linux gives them:
// a large run writes hundreds of megabytes once, and taking them a 4 KiB page fault at a time cost a fifth of its
// time on this project's virtual machines. Small vectors come from the usual allocator.
#pragma once

#include <cstddef>
#include <new>
#include <sys/mman.h>
#include <vector>

namespace sim::core {

// Allocates arrays of at least `huge_page_threshold` bytes with mmap, advised to use transparent huge pages
// (MADV_HUGEPAGE: the kernel backs them with 2 MiB pages where it can, with ordinary ones where it cannot or where
// transparent huge pages are off); anything smaller with operator new.
template <class T>
class HugePageAllocator {
 public:
  using value_type = T;
  static constexpr std::size_t huge_page = std::size_t{2} << 20;
  static constexpr std::size_t huge_page_threshold = std::size_t{4} << 20;

  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>& /*unused*/) noexcept // NOLINT(google-explicit-constructor)
  {}

  T* allocate(std::size_t n)
  {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < huge_page_threshold)
      return static_cast<T*>(::operator new(bytes));
    void* p = mmap(nullptr, rounded(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw std::bad_alloc();
    madvise(p, rounded(bytes), MADV_HUGEPAGE); // advice only: without it, ordinary pages
    return static_cast<T*>(p);
  }

  void deallocate(T* p, std::size_t n) noexcept
  {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < huge_page_threshold)
      ::operator delete(p);
    else
      munmap(p, rounded(bytes));
  }

  friend bool operator==(const HugePageAllocator& /*unused*/, const HugePageAllocator& /*unused*/) { return true; }

 private:
  static std::size_t rounded(std::size_t bytes) { return (bytes + huge_page - 1) / huge_page * huge_page; }
};

template <class T>
using BigVector = std::vector<T, HugePageAllocator<T>>;

} // namespace sim::core
