// The weights on 2 MiB pages: the last piece of streaming them at the memory's rate (chapter 13).
//
// The CPU finds each address through a page table, and caches the translations it used last (the TLB, some two
// thousand entries). On 4 KiB pages a decode step of the 0.8B in Q8_0 reads 0.8 GB through about 200,000 pages: a
// page-table walk every 4 KiB, which the prefetchers of rows8.cpp do not hide, and the hardware's stop at each page
// boundary. On 2 MiB pages the same bytes take about 400 translations. Linux gives a process 2 MiB pages where it
// asks for them (madvise MADV_HUGEPAGE, "transparent huge pages" in its "madvise" or "always" mode), for memory not
// yet touched; torch's allocator does not ask (unless THP_MEM_ALLOC_ENABLE is set before it starts), and llama.cpp
// reads its file through the page cache, which may hold it on 2 MiB pages too. Measured on the 0.8B's q8_0 and q4_0
// decode: 3 to 5 % faster steps.
//
//   on_huge_pages(t)   a copy of t in fresh memory aligned to 2 MiB, asked for on 2 MiB pages before it is written;
//                      freed with the tensor. Elsewhere than Linux (or where the memory cannot be mapped): t itself.
#include <torch/types.h>  // ATen and torch::Tensor, without the Python binding headers module.cpp needs

#include <cstdint>
#include <cstring>

#ifdef __linux__
#include <sys/mman.h>
#endif

torch::Tensor on_huge_pages(torch::Tensor t) {
  TORCH_CHECK(t.device().is_cpu() && t.is_contiguous(), "t must be a contiguous tensor on the CPU");
#ifdef __linux__
  constexpr size_t PAGE = size_t(2) << 20;
  const size_t n = t.numel() * t.element_size();
  const size_t size = (n + PAGE - 1) / PAGE * PAGE + PAGE;  // whole pages, and room to align the start
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return t;
  char* start = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(base) + PAGE - 1) / PAGE * PAGE);
  madvise(start, size - (start - static_cast<char*>(base)), MADV_HUGEPAGE);  // before the first write: the faults
  std::memcpy(start, t.data_ptr(), n);                                        // then take 2 MiB pages
  return torch::from_blob(start, t.sizes(), [base, size](void*) { munmap(base, size); }, t.options());
#else
  return t;
#endif
}
