// The one-row product y = W x, written by hand: what a decode step spends its time in (chapter 13).
//
// A decode step multiplies one activation row by every weight once, so a kernel is fast when it streams the weight
// from memory at the read bandwidth and does little per byte. Each function below is one step of the chapter:
//
//   rowdot_fp32   fp32 W, the plain loop: one float sum per row, added in order (the compiler may not reorder it)
//   rowdot_fp32   with vector=true: `#pragma omp simd reduction(+:acc)` lets the compiler split the sum into lanes
//   rowdot_bf16   bf16 W widened to fp32 as it is read (16 bits shifted up: exact), the same vector loop
//   quantize_q8_0 the activation row to llama.cpp's Q8_0 blocks, once per product: d = max|x|/127, id = 1/d,
//                 q = roundf(x·id), halves away from zero as C's roundf (qwen/gguf_blocks.py's rule)
//   rowdot_q8_0   Q8_0 W times the Q8_0 row: per block of 32, Σ q_w·q_x in int32 (exact), then one fp32
//                 product d_w·d_x·Σ added to the row's sum: llama.cpp's W8A8 dot
//   rowdot_q4_0   Q4_0 W (two codes a byte: value j low nibble of byte j, value j+16 high) times the Q8_0 row:
//                 the nibbles unpacked in registers, 8 subtracted, the same int32 block sum
//
// Weights are held as the GGUF file's bytes: a row of K values is K/32 blocks, each an fp16 d then the codes
// (34 bytes for Q8_0, 18 for Q4_0). avx2=true takes the AVX2 intrinsics where this file was compiled for AVX2
// (ggml's way: maddubs of unsigned and signed bytes, then madd into int32 lanes), otherwise the portable loop.
// Rows are split across torch's threads with at::parallel_for.
#include <torch/types.h>  // ATen and torch::Tensor, without the Python binding headers module.cpp needs
#include <ATen/Parallel.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#define ROWDOT_AVX2 1
#else
#define ROWDOT_AVX2 0
#endif

namespace {

constexpr int QK = 32;         // values in a block
constexpr int Q8_BYTES = 34;   // fp16 d + 32 int8 codes
constexpr int Q4_BYTES = 18;   // fp16 d + 16 bytes of nibbles
constexpr int64_t GRAIN = 16;  // rows a thread takes at least
constexpr int AHEAD = 512;     // bytes of a weight row asked for ahead of use: four rows are four streams, more
                               // than a CPU's prefetcher follows at full rate (measured: 10-15 % more bytes/s)

float half(const uint8_t* p) {  // the fp16 number stored little-endian at p
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return static_cast<float>(c10::Half(bits, c10::Half::from_bits()));
}

void check(const torch::Tensor& t, at::ScalarType dtype, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), name, " must be on the CPU");
  TORCH_CHECK(t.scalar_type() == dtype, name, " has the wrong dtype: expected ", dtype, ", got ", t.scalar_type());
  TORCH_CHECK(t.dim() == 2 && t.is_contiguous(), name, " must be a contiguous 2-D tensor");
}

// ---- fp32 and bf16 weights: one float sum per row --------------------------------------------------------------

float dot_fp32(const float* w, const float* x, int64_t K) {  // the sum in order: one add after another
  float acc = 0.f;
  for (int64_t k = 0; k < K; ++k) acc += w[k] * x[k];
  return acc;
}

float dot_fp32_vector(const float* w, const float* x, int64_t K) {  // lanes of partial sums, added at the end
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (int64_t k = 0; k < K; ++k) acc += w[k] * x[k];
  return acc;
}

float dot_bf16(const uint16_t* w, const float* x, int64_t K) {  // bf16 is fp32's top half: shift it back up
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (int64_t k = 0; k < K; ++k) {
    uint32_t bits = static_cast<uint32_t>(w[k]) << 16;
    float wk;
    std::memcpy(&wk, &bits, 4);
    acc += wk * x[k];
  }
  return acc;
}

// ---- Q8_0 and Q4_0 blocks times a Q8_0 row ---------------------------------------------------------------------

float dot_q8_0(const uint8_t* w, const uint8_t* x, int64_t nb) {
  float acc = 0.f;
  for (int64_t b = 0; b < nb; ++b, w += Q8_BYTES, x += Q8_BYTES) {
    const int8_t* qw = reinterpret_cast<const int8_t*>(w + 2);
    const int8_t* qx = reinterpret_cast<const int8_t*>(x + 2);
    int32_t sum = 0;  // at most 32·127·127: exact
    for (int j = 0; j < QK; ++j) sum += qw[j] * qx[j];
    acc += static_cast<float>(sum) * (half(w) * half(x));
  }
  return acc;
}

float dot_q4_0(const uint8_t* w, const uint8_t* x, int64_t nb) {
  float acc = 0.f;
  for (int64_t b = 0; b < nb; ++b, w += Q4_BYTES, x += Q8_BYTES) {
    const uint8_t* qw = w + 2;
    const int8_t* qx = reinterpret_cast<const int8_t*>(x + 2);
    int8_t v[QK];  // the nibbles unpacked first, so the sum below is the Q8_0 loop the vectorizer knows
    for (int j = 0; j < QK / 2; ++j) {
      v[j] = static_cast<int8_t>((qw[j] & 15) - 8);
      v[j + QK / 2] = static_cast<int8_t>((qw[j] >> 4) - 8);
    }
    int32_t sum = 0;
    for (int j = 0; j < QK; ++j) sum += v[j] * qx[j];
    acc += static_cast<float>(sum) * (half(w) * half(x));
  }
  return acc;
}

#if ROWDOT_AVX2
float hsum(__m256 v) {  // the 8 lanes added: (0+4, 1+5, 2+6, 3+7), then pairs, then the last two
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float half_f16c(const uint8_t* p) {  // the same fp16 number, converted by the CPU's own instruction
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return _cvtsh_ss(bits);
}

// maddubs multiplies unsigned bytes by signed ones and adds neighbours into int16; madd with 1s adds those pairs
// into 8 int32 lanes, each the exact sum of 4 products (at most 4·127·128: no overflow anywhere).
__m256i lanes(__m256i u, __m256i s) { return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)); }

// R weight rows against one Q8_0 row: each activation block is loaded, and what depends on it alone is computed,
// once for the R rows, and R independent sums keep the FMA unit busy (one chain of FMAs would wait on itself).
//   Q8_0: Σ q_w·q_x = Σ |q_x| · (q_w with q_x's sign): |q_x| is the unsigned side, shared by the R rows.
//   Q4_0: the codes as stored, 0..15, are already unsigned: Σ (q − 8)·q_x = Σ q·q_x − 8·Σ q_x, and 8·Σ q_x per lane
//         is shared by the R rows. The lanes' integers are the same as unpacking to −8..7 first.
// Each row's float sum is the same whatever R is: per lane, one FMA per block in block order, then `hsum`.
template <bool Q4, int R>
void dots_avx2(const uint8_t* w, int64_t row, const uint8_t* x, int64_t nb, float* out) {
  constexpr int BYTES = Q4 ? Q4_BYTES : Q8_BYTES;
  const __m256i low4 = _mm256_set1_epi8(15);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* xb = x + b * Q8_BYTES;
    const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 2));
    const float dx = half_f16c(xb);
    const __m256i shared = Q4 ? lanes(_mm256_set1_epi8(8), qx) : _mm256_sign_epi8(qx, qx);  // 8·Σq_x, or |q_x|
    for (int r = 0; r < R; ++r) {
      const uint8_t* wb = w + r * row + b * BYTES;
      _mm_prefetch(reinterpret_cast<const char*>(wb + AHEAD), _MM_HINT_T0);  // a later block of this row
      __m256i sums;
      if constexpr (Q4) {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 2));  // 32 nibbles
        const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), low4);  // 0..15
        sums = _mm256_sub_epi32(lanes(q, qx), shared);
      } else {
        const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 2));
        sums = lanes(shared, _mm256_sign_epi8(qw, qx));
      }
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(half_f16c(wb) * dx), _mm256_cvtepi32_ps(sums), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}
#endif

// ---- the products: every row of W against every row of x, rows split across threads ---------------------------

template <typename Dot>
torch::Tensor rows(int64_t M, int64_t N, Dot dot) {  // y (M, N) with y[m][n] = dot(m, n)
  auto y = torch::empty({M, N}, torch::kFloat32);
  float* out = y.data_ptr<float>();
  at::parallel_for(0, N, GRAIN, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n)
      for (int64_t m = 0; m < M; ++m) out[m * N + n] = dot(m, n);
  });
  return y;
}

#if ROWDOT_AVX2
template <bool Q4>  // rows four at a time (the last few one at a time), split across threads
torch::Tensor rows_avx2(const uint8_t* xq, int64_t M, int64_t xrow, const uint8_t* w, int64_t N, int64_t row,
                        int64_t nb) {
  auto y = torch::empty({M, N}, torch::kFloat32);
  float* out = y.data_ptr<float>();
  at::parallel_for(0, (N + 3) / 4, GRAIN / 4, [&](int64_t begin, int64_t end) {
    float four[4];
    for (int64_t g = begin; g < end; ++g) {
      const int64_t n = 4 * g;
      for (int64_t m = 0; m < M; ++m) {
        if (n + 4 <= N) {
          dots_avx2<Q4, 4>(w + n * row, row, xq + m * xrow, nb, four);
          for (int r = 0; r < 4; ++r) out[m * N + n + r] = four[r];
        } else {
          for (int64_t k = n; k < N; ++k) dots_avx2<Q4, 1>(w + k * row, row, xq + m * xrow, nb, out + m * N + k);
        }
      }
    }
  });
  return y;
}
#endif

}  // namespace

void check_fp32(const torch::Tensor& t, const char* name, int64_t dim) {  // an input of the live model's C++: the
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous() && t.dim() == dim,
              name, " must be a contiguous ", dim, "-D fp32 tensor on the CPU");  // one message for every file
}

namespace {

// C's roundf (halves away from zero), written so that the compiler vectorizes it: the truncation, then one step
// away from zero where what was cut off (exact in fp32) is at least a half. Equal to roundf on every float of
// magnitude up to 128 (checked one by one), the range of x·(1/d); a branch per number (roundf, or a truncation and a
// comparison that picks) mispredicts on half of them, and cost a Q8_0 decode step one part in twenty. File-local,
// so that it can be inlined: an exported function of a shared library is called through its symbol table.
int32_t round_away(float v) {
  const int32_t t = static_cast<int32_t>(v);
  const float cut = v - static_cast<float>(t);
  return t + (cut >= 0.5f) - (cut <= -0.5f);
}

}  // namespace

void q8_0_block(const float* src, uint8_t* dst) {  // 32 values -> one Q8_0 block (34 bytes)
  float amax = 0.f;
  for (int j = 0; j < QK; ++j) amax = std::max(amax, std::fabs(src[j]));
  const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
  const uint16_t bits = c10::Half(d).x;  // d stored rounded to fp16; the codes use the fp32 d
  std::memcpy(dst, &bits, 2);
  for (int j = 0; j < QK; ++j) dst[2 + j] = static_cast<uint8_t>(round_away(src[j] * id));  // int8 codes
}

torch::Tensor quantize_q8_0(torch::Tensor x) {  // x (M, K) fp32 -> (M, K/32·34) uint8: the row's Q8_0 blocks
  check(x, torch::kFloat32, "x");
  const int64_t M = x.size(0), K = x.size(1), nb = K / QK;
  TORCH_CHECK(K % QK == 0, "Q8_0 cuts a row into blocks of 32: the width ", K, " is not a multiple of 32");
  auto out = torch::empty({M, nb * Q8_BYTES}, torch::kUInt8);
  const float* src = x.data_ptr<float>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  for (int64_t i = 0; i < M * nb; ++i) q8_0_block(src + i * QK, dst + i * Q8_BYTES);
  return out;
}

torch::Tensor rowdot_fp32(torch::Tensor x, torch::Tensor w, bool vector) {  // x (M, K) fp32, w (N, K) fp32
  check(x, torch::kFloat32, "x");
  check(w, torch::kFloat32, "w");
  TORCH_CHECK(x.size(1) == w.size(1), "x has ", x.size(1), " inputs, w ", w.size(1));
  const int64_t K = x.size(1);
  const float *xp = x.data_ptr<float>(), *wp = w.data_ptr<float>();
  if (vector) return rows(x.size(0), w.size(0), [&](int64_t m, int64_t n) { return dot_fp32_vector(wp + n * K, xp + m * K, K); });
  return rows(x.size(0), w.size(0), [&](int64_t m, int64_t n) { return dot_fp32(wp + n * K, xp + m * K, K); });
}

torch::Tensor rowdot_bf16(torch::Tensor x, torch::Tensor w) {  // x (M, K) fp32, w (N, K) bf16
  check(x, torch::kFloat32, "x");
  check(w, torch::kBFloat16, "w");
  TORCH_CHECK(x.size(1) == w.size(1), "x has ", x.size(1), " inputs, w ", w.size(1));
  const int64_t K = x.size(1);
  const float* xp = x.data_ptr<float>();
  const uint16_t* wp = reinterpret_cast<const uint16_t*>(w.data_ptr<at::BFloat16>());
  return rows(x.size(0), w.size(0), [&](int64_t m, int64_t n) { return dot_bf16(wp + n * K, xp + m * K, K); });
}

torch::Tensor rowdot_q8_0(torch::Tensor x, torch::Tensor w, bool avx2) {  // x (M, K) fp32, w (N, K/32·34) uint8
  check(w, torch::kUInt8, "w");
  auto xq = quantize_q8_0(x);
  TORCH_CHECK(w.size(1) == xq.size(1), "w's rows are ", w.size(1), " bytes; x's ", x.size(1), " inputs need ",
              xq.size(1), " bytes of Q8_0 blocks (34 per 32 inputs)");
  const int64_t nb = xq.size(1) / Q8_BYTES, row = w.size(1);
  const uint8_t *xp = xq.data_ptr<uint8_t>(), *wp = w.data_ptr<uint8_t>();
#if ROWDOT_AVX2
  if (avx2) return rows_avx2<false>(xp, x.size(0), row, wp, w.size(0), row, nb);
#endif
  return rows(x.size(0), w.size(0), [&](int64_t m, int64_t n) { return dot_q8_0(wp + n * row, xp + m * row, nb); });
}

torch::Tensor rowdot_q4_0(torch::Tensor x, torch::Tensor w, bool avx2) {  // x (M, K) fp32, w (N, K/32·18) uint8
  check(w, torch::kUInt8, "w");
  auto xq = quantize_q8_0(x);
  const int64_t nb = xq.size(1) / Q8_BYTES, row = w.size(1);
  TORCH_CHECK(row == nb * Q4_BYTES, "w's rows are ", row, " bytes; x's ", x.size(1), " inputs need ", nb * Q4_BYTES,
              " bytes of Q4_0 blocks (18 per 32 inputs)");
  const uint8_t *xp = xq.data_ptr<uint8_t>(), *wp = w.data_ptr<uint8_t>();
  const int64_t xrow = xq.size(1);
#if ROWDOT_AVX2
  if (avx2) return rows_avx2<true>(xp, x.size(0), xrow, wp, w.size(0), row, nb);
#endif
  return rows(x.size(0), w.size(0), [&](int64_t m, int64_t n) { return dot_q4_0(wp + n * row, xp + m * xrow, nb); });
}

bool rowdot_avx2() { return ROWDOT_AVX2; }  // were the AVX2 loops compiled in?
