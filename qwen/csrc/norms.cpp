// The two norms of a decode step, each in one call: what is left between the products once they stream at the
// memory's rate (chapter 13).
//
// A decode step takes 79 norms on the 0.8B (two per layer, the last one, q and k per attention layer, the gated one
// per DeltaNet layer), each of one row. Written as torch calls (qwen/norm.py) a norm is six or seven of them, a new
// tensor each, some 30 µs for a row of 1024 numbers: 2 to 2.5 ms a step, a twentieth of a Q8_0 step. Here it is
// one pass to sum the squares and one to scale, for each row:
//
//   rms_norm        y = x / sqrt(mean(x²) + eps) · (shift + w)    shift 1: RMSNorm's zero-centred weight
//   gated_rms_norm  y = w · x / sqrt(mean(x²) + eps) · silu(z)    GatedRMSNorm, the DeltaNet output's norm
//
// fp32 throughout, the products in qwen/norm.py's order; the sum of squares is added in order of i (torch's mean
// adds in vector lanes), so the result is the teaching norm's up to fp32 rounding (tests/test_kernel.py holds both to
// float64).
#include <torch/types.h>  // ATen and torch::Tensor, without the Python binding headers module.cpp needs

#include <cmath>

void check_fp32(const torch::Tensor& t, const char* name, int64_t dim);  // rowdot.cpp

namespace {

void check_weight(const torch::Tensor& w, const torch::Tensor& x) {  // w: one number for each of x's columns
  TORCH_CHECK(w.scalar_type() == torch::kFloat32 && w.is_contiguous() && w.numel() == x.size(1),
              "w must be a contiguous fp32 vector of x's width ", x.size(1));
}

float inverse_rms(const float* x, int64_t D, float eps) {  // 1 / sqrt(mean(x²) + eps)
  float ss = 0.f;
  for (int64_t i = 0; i < D; ++i) ss += x[i] * x[i];
  return 1.f / std::sqrt(ss / static_cast<float>(D) + eps);
}

}  // namespace

// x (R, D), w (D) -> y (R, D)
torch::Tensor rms_norm(torch::Tensor x, torch::Tensor w, double eps, double shift) {
  check_fp32(x, "x", 2);
  check_weight(w, x);
  const int64_t R = x.size(0), D = x.size(1);
  auto y = torch::empty_like(x);
  const float *xp = x.data_ptr<float>(), *wp = w.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const float s = static_cast<float>(shift);
  for (int64_t r = 0; r < R; ++r, xp += D, yp += D) {
    const float inv = inverse_rms(xp, D, static_cast<float>(eps));
    for (int64_t i = 0; i < D; ++i) yp[i] = xp[i] * inv * (s + wp[i]);
  }
  return y;
}

// x, z (R, D), w (D) -> y (R, D)
torch::Tensor gated_rms_norm(torch::Tensor x, torch::Tensor z, torch::Tensor w, double eps) {
  check_fp32(x, "x", 2);
  check_fp32(z, "z", 2);
  TORCH_CHECK(z.sizes() == x.sizes(), "the gate z must have x's shape");
  check_weight(w, x);
  const int64_t R = x.size(0), D = x.size(1);
  auto y = at::silu(z);  // torch's own silu, vectorised (std::exp one number at a time took longer than the rest)
  const float *xp = x.data_ptr<float>(), *wp = w.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t r = 0; r < R; ++r, xp += D, yp += D) {
    const float inv = inverse_rms(xp, D, static_cast<float>(eps));
    for (int64_t i = 0; i < D; ++i) yp[i] = wp[i] * (xp[i] * inv) * yp[i];  // y held silu(z)
  }
  return y;
}
