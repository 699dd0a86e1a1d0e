// A bf16 product of a few rows, x Wᵀ, with the CPU's bf16 dot instruction: the bf16 fast model's decode products.
//
// oneDNN multiplies one bf16 row by a packed weight at the read bandwidth, but on a CPU with AMX it takes its AMX
// kernel for that row too, and that kernel loses half its speed and more whenever other programs share the machine
// (measured: 5 tokens/s where the same decode with oneDNN held to AVX-512 ran at 9, llama.cpp's bf16 at 10). This
// file is rowdot.cpp's bf16 loop with the AVX-512 bf16 instruction dpbf16ps (x86's AVX512_BF16): per lane, two bf16
// products added to an fp32 sum, the products exact (8 bits of mantissa times 8 fit fp32's 24), each addition
// rounded to fp32 as an fp32 dot rounds. Lane l of a row's 16 sums takes the pairs at k = 32j + 2l, 32j + 2l + 1, in
// order of j; the 16 lanes are then added in one fixed tree, and the sum rounded to bf16 once (nearest, ties to
// even). That order does not depend on how many rows x has or how rows are shared among threads, so a row's result is
// the same in a decode step, a batch or a speculative verify pass. (dpbf16ps also reads subnormal numbers as zeros
// and writes its sums' as zeros: below 1e-38, nothing a model's sum holds.)
//
// The weight is read as the checkpoint holds it, row after row, RB rows at a time (each a stream the prefetcher
// follows, with a prefetch AHEAD bytes on): no packed copy, no reordering. Each chunk of 32 weights is loaded once
// and multiplied with every row of x (up to XB at a time), so a few rows of x cost one pass over W.
#include <torch/types.h>  // ATen and torch::Tensor, without the Python binding headers module.cpp needs
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#define BF16ROWS 1
#else
#define BF16ROWS 0
#endif

namespace {

#if BF16ROWS
constexpr int AHEAD = 1024;  // bytes of each weight row asked for ahead of use (512 to 1024 measured alike, 2048 less)

__m512bh chunk(const c10::BFloat16* p) { return (__m512bh)_mm512_loadu_si512(p); }  // 32 bf16 at p

__m512bh tail(const c10::BFloat16* p, int64_t left) {  // the last `left` (< 32) bf16 at p, zeros after them
  return (__m512bh)_mm512_maskz_loadu_epi16((__mmask32(1) << left) - 1, p);
}

// out[m * N + r] = row r of w · row m of x, for RB weight rows (the first `nr` real: the others repeat the last, and
// are not written) and XB rows of x. Every loop bound is a constant, so the RB·XB sums live in registers.
template <int RB, int XB>
void block(const c10::BFloat16* w, const c10::BFloat16* x, int64_t K, int nr, float* out, int64_t N) {
  const c10::BFloat16* row[RB];
  for (int r = 0; r < RB; ++r) row[r] = w + std::min(r, nr - 1) * K;
  __m512 acc[RB][XB];
  for (int r = 0; r < RB; ++r)
    for (int m = 0; m < XB; ++m) acc[r][m] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    __m512bh xs[XB];
    for (int m = 0; m < XB; ++m) xs[m] = chunk(x + m * K + k);
    for (int r = 0; r < RB; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(row[r] + k) + AHEAD, _MM_HINT_T0);
      const __m512bh wr = chunk(row[r] + k);
      for (int m = 0; m < XB; ++m) acc[r][m] = _mm512_dpbf16_ps(acc[r][m], wr, xs[m]);
    }
  }
  if (k < K) {  // a width that is not a multiple of 32: the same lanes, zeros beyond the row's end
    __m512bh xs[XB];
    for (int m = 0; m < XB; ++m) xs[m] = tail(x + m * K + k, K - k);
    for (int r = 0; r < RB; ++r) {
      const __m512bh wr = tail(row[r] + k, K - k);
      for (int m = 0; m < XB; ++m) acc[r][m] = _mm512_dpbf16_ps(acc[r][m], wr, xs[m]);
    }
  }
  for (int r = 0; r < nr; ++r)
    for (int m = 0; m < XB; ++m) out[m * N + r] = _mm512_reduce_add_ps(acc[r][m]);
}
#endif

}  // namespace

bool bf16_rows_run() { return BF16ROWS; }

// x (M, K) bf16, w (N, K) bf16, both contiguous -> x Wᵀ (M, N) bf16, each sum in fp32 rounded once
torch::Tensor bf16_rows(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(BF16ROWS, "the bf16 rows kernel needs AVX-512 with bf16 instructions, which this build lacks");
  for (const auto* t : {&x, &w})
    TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == torch::kBFloat16 && t->dim() == 2 && t->is_contiguous(),
                "x and w must be contiguous 2-D bf16 tensors on the CPU");
  TORCH_CHECK(x.size(1) == w.size(1), "x has ", x.size(1), " inputs per row, w ", w.size(1));
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  auto y = torch::empty({M, N}, torch::kFloat32);
#if BF16ROWS
  constexpr int RB = 8, XB = 2;  // 8 weight rows in flight, times one or two rows of x
  const auto* wp = w.data_ptr<c10::BFloat16>();
  const auto* xp = x.data_ptr<c10::BFloat16>();
  float* out = y.data_ptr<float>();
  at::parallel_for(0, (N + RB - 1) / RB, 4, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const int64_t n0 = g * RB;
      const int nr = static_cast<int>(std::min<int64_t>(RB, N - n0));
      for (int64_t m0 = 0; m0 < M; m0 += XB)
        if (M - m0 == 1)
          block<RB, 1>(wp + n0 * K, xp + m0 * K, K, nr, out + m0 * N + n0, N);
        else
          block<RB, XB>(wp + n0 * K, xp + m0 * K, K, nr, out + m0 * N + n0, N);
    }
  });
#endif
  return y.to(torch::kBFloat16);
}
