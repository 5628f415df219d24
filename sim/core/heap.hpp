// The C heap of a large run in 2 MiB pages, as core::BigVector's arrays are: the replay's link-usage series and the
// metrics' lists are millions of small and middling allocations, and glibc's malloc grows its heap a 4 KiB page fault
// at a time (on this project's virtual machines a large run spent a tenth of its time in those faults).
#pragma once

#include <cstddef>

namespace sim::core {

// Grows the C heap by about `bytes` at once, advised to use transparent huge pages (the kernel backs the pages with
// 2 MiB ones as they are first written, where it can), and keeps in the heap what is freed (not trimmed back, not in
// mappings of their own). For a process that is about to allocate that much; speed only, nothing depends on it. Does
// nothing below 32 MiB, under a sanitizer's allocator or without glibc.
void reserve_heap_in_huge_pages(std::size_t bytes);

} // namespace sim::core
