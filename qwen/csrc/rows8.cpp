// Eight weight rows at a time, their blocks interleaved: the last step of chapter 13, and the live model's kernel.
//
// rowdot.cpp's AVX2 loop computes one row's block sums in the 8 lanes of a vector, then turns each into a float,
// scales it and adds the lanes up: per row and block that is as many instructions again as the integer dot itself,
// and the Q4_0 dot ran at half the memory's speed. llama.cpp repacks its Q4_0 weights for x86 at load time (its
// "Q4_0 8x8" layout) so that one vector holds one number for each of 8 rows; this file does the same for Q8_0 and
// Q4_0. The rows are cut into groups of 8 (the last padded with zero rows) and each group's block b is stored as
//
//   8 fp16 d, rows 0..7 (16 bytes), then the codes in chunks of 32 bytes: chunk c holds 4 bytes of each row,
//   row r's bytes 4c..4c+3 at 4r                    Q8_0: 8 chunks (the 32 codes);  Q4_0: 4 chunks (16 bytes)
//
// the same bytes as the GGUF file's 8 blocks, in another order (qwen/blocklinear.py's `group` and `ungroup`).
// Then for one block of the activation: broadcast its 4 codes q_x[4c..4c+3] to all 8 lanes, multiply by chunk c
// (maddubs: unsigned × signed bytes, neighbours added; madd: pairs added into int32), and lane r holds row r's 4
// products: after the chunks, row r's whole block sum, exact in int32. One float conversion, one scale vector (the
// 8 d's in one instruction) and one add finish 8 rows. Per lane the float arithmetic is rowdot.cpp's portable loop
// exactly (acc += float(Σ) · (d_w·d_x), block after block, no fused multiply-add), so the two give the same bits.
//   Q8_0: Σ q_w·q_x = Σ |q_x| · (q_w with q_x's sign), as in rowdot.cpp: maddubs needs one unsigned side.
//   Q4_0: the codes 0..15 as stored are unsigned: Σ (q − 8)·q_x = Σ q·q_x − 8·Σ q_x, with Σ q_x once per block.
// Where the CPU has VNNI (AVX-VNNI, or AVX-512 VNNI with VL), dpbusd does maddubs and madd in one instruction
// (and cannot saturate: the sums are the same integers).
#include <torch/types.h>  // ATen and torch::Tensor, without the Python binding headers module.cpp needs
#include <ATen/Parallel.h>

#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#define ROWS8 1
#else
#define ROWS8 0
#endif
#if ROWS8 && (defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__)))
#define ROWS8_VNNI 1
#else
#define ROWS8_VNNI 0
#endif

void q8_0_block(const float* src, uint8_t* dst);  // rowdot.cpp: 32 activations rounded to one Q8_0 block
void check_fp32(const torch::Tensor& t, const char* name, int64_t dim);

namespace {

constexpr int QK = 32, G = 8;  // values in a block, rows in a group
constexpr int Q8_BYTES = 34;   // one Q8_0 block (the activation's, or a weight row's)
constexpr int Q4_BYTES = 18;   // one Q4_0 block of a weight row
constexpr int AHEAD = 8192;    // bytes of the group asked for ahead of use, into L2 (T1): without it a thread
                               // streams the weight at about 0.7 of the read bandwidth; into L1 (T0) a tenth
                               // slower than into L2 over a whole decode step's products; 4-32 KB ahead measured
                               // alike, 2 KB slower

#if ROWS8
#if ROWS8_VNNI
__m256i dot4(__m256i sum, __m256i u, __m256i s) {  // sum + per lane Σ of 4 products u·s (u unsigned bytes)
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(sum, u, s);
#else
  return _mm256_dpbusd_avx_epi32(sum, u, s);
#endif
}
#else
__m256i dot4(__m256i sum, __m256i u, __m256i s) {
  return _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
#endif

__m256i x4(const uint8_t* p) {  // 4 activation codes broadcast to the 8 lanes
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// One group against one activation row: out[r] = row r's sum, for the 8 rows of the group.
template <bool Q4>
void group_dot(const uint8_t* w, const uint8_t* x, const uint8_t* xabs, const float* dx, const int32_t* sx,
               int64_t nb, float* out) {
  constexpr int GROUP_BYTES = G * (Q4 ? Q4_BYTES : Q8_BYTES);
  const __m256i low4 = _mm256_set1_epi8(15);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, w += GROUP_BYTES) {
    for (int o = 0; o < GROUP_BYTES; o += 64)  // the cache lines of a block AHEAD bytes on
      _mm_prefetch(reinterpret_cast<const char*>(w + AHEAD + o), _MM_HINT_T1);
    const uint8_t* qx = x + b * Q8_BYTES + 2;
    __m256i sum = _mm256_setzero_si256();
    if constexpr (Q4) {
      for (int c = 0; c < 4; ++c) {
        const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16 + 32 * c));
        sum = dot4(sum, _mm256_and_si256(p, low4), x4(qx + 4 * c));                           // values 4c..
        sum = dot4(sum, _mm256_and_si256(_mm256_srli_epi16(p, 4), low4), x4(qx + 16 + 4 * c));  // 16 + 4c..
      }
      sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(8 * sx[b]));
    } else {
      const uint8_t* ax = xabs + b * QK;
      for (int c = 0; c < 8; ++c) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16 + 32 * c));
        sum = dot4(sum, x4(ax + 4 * c), _mm256_sign_epi8(q, x4(qx + 4 * c)));
      }
    }
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w))),
                                   _mm256_set1_ps(dx[b]));  // d_w · d_x for the 8 rows
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(sum), d));
  }
  _mm256_storeu_ps(out, acc);
}
#endif

}  // namespace

bool rows8_runs() { return ROWS8; }
bool rows8_vnni() { return ROWS8_VNNI; }

// x (M, K) fp32, w (ceil(N/8), K/32 · 8 · bytes) uint8 grouped as above -> x Wᵀ (M, N) fp32
torch::Tensor rowdot_rows8(torch::Tensor x, torch::Tensor w, int64_t N, bool q4) {
  TORCH_CHECK(ROWS8, "the eight-row kernel needs AVX2 and F16C, which this build was not compiled for");
  TORCH_CHECK(w.device().is_cpu() && w.scalar_type() == torch::kUInt8 && w.dim() == 2 && w.is_contiguous(),
              "w must be a contiguous 2-D uint8 tensor on the CPU");
  check_fp32(x, "x", 2);
  TORCH_CHECK(x.size(1) % QK == 0, "Q8_0 cuts a row into blocks of 32: the width ", x.size(1),
              " is not a multiple of 32");
  const int64_t M = x.size(0), nb = x.size(1) / QK, groups = w.size(0);
  const int64_t need = nb * G * (q4 ? Q4_BYTES : Q8_BYTES);
  TORCH_CHECK(w.size(1) == need, "w's groups are ", w.size(1), " bytes; ", x.size(1), " inputs need ",
              need);
  TORCH_CHECK(N > G * (groups - 1) && N <= G * groups, N, " rows do not fill ", groups, " groups of 8");
  // the activation as Q8_0 blocks, and what each block gives every row: d_x as a float, |q_x| (Q8_0), Σ q_x (Q4_0)
  std::vector<uint8_t> xq(M * nb * Q8_BYTES), xabs(M * nb * QK);
  std::vector<float> dx(M * nb);
  std::vector<int32_t> sx(M * nb);
  const float* src = x.data_ptr<float>();
  for (int64_t i = 0; i < M * nb; ++i) {
    uint8_t* blk = xq.data() + i * Q8_BYTES;
    q8_0_block(src + i * QK, blk);
    uint16_t bits;
    std::memcpy(&bits, blk, 2);
    dx[i] = static_cast<float>(c10::Half(bits, c10::Half::from_bits()));
    int32_t sum = 0;
    for (int j = 0; j < QK; ++j) {
      const int8_t q = static_cast<int8_t>(blk[2 + j]);
      sum += q;
      xabs[i * QK + j] = static_cast<uint8_t>(q < 0 ? -q : q);
    }
    sx[i] = sum;
  }
  auto y = torch::empty({M, N}, torch::kFloat32);
#if ROWS8
  float* out = y.data_ptr<float>();
  const uint8_t* wp = w.data_ptr<uint8_t>();
  const int64_t row = w.size(1);
  at::parallel_for(0, groups, 2, [&](int64_t begin, int64_t end) {
    float eight[G];
    for (int64_t g = begin; g < end; ++g)
      for (int64_t m = 0; m < M; ++m) {
        const uint8_t *xm = xq.data() + m * nb * Q8_BYTES, *am = xabs.data() + m * nb * QK;
        const float* dm = dx.data() + m * nb;
        const int32_t* sm = sx.data() + m * nb;
        if (q4)
          group_dot<true>(wp + g * row, xm, am, dm, sm, nb, eight);
        else
          group_dot<false>(wp + g * row, xm, am, dm, sm, nb, eight);
        const int64_t n0 = g * G, n = std::min<int64_t>(G, N - n0);
        std::memcpy(out + m * N + n0, eight, n * sizeof(float));
      }
  });
#endif
  return y;
}
