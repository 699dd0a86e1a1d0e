// One token through a Gated DeltaNet layer's memory, in one function: the rest of a decode step (chapter 13).
//
// With the weights streamed at the memory's rate (rowdot.cpp, rows8.cpp), what is left of a decode step is the work
// between the products, and in a DeltaNet layer most of it is small: a conv over 4 inputs per channel, two norms,
// two gates, and the delta rule on the fp32 state S (H × dk × dv: 1 MiB a layer for the 0.8B). Written as torch
// calls (qwen/kernels.py's conv_silu and delta_step), that is some 40 calls a layer, each a pass over a new tensor:
// S alone is read or written about 8 times. Here it is two passes over S per head and nothing else:
//
//   conv:    u = silu(Σ_i w_i · x_{t−3+i}), the window shifted in place     (qwen/deltanet.py's causal_conv)
//   heads:   q = u_q / ‖u_q‖ / √dk, k = u_k / ‖u_k‖ (per key head, eps 1e-6 inside the root), v = u_v
//   gates:   β = sigmoid(b), g = −e^A_log · softplus(a + dt_bias)
//   pass 1:  S ← e^g · S and p = Sᵀk, row by row                               (value head h reads key head h / (H/Hk))
//   pass 2:  S ← S + k ⊗ β(v − p) and o = Sᵀq, row by row
//
// fp32 throughout, each sum over dk in order of i (the loops over dv are the vector lanes), so the result is the
// teaching recurrent_delta_rule's up to the order of fp32 roundings (tests/test_deltastep.py holds it to float64).
// The conv's channels, then the B · H heads, are split across torch's threads.
#include <torch/types.h>  // ATen and torch::Tensor, without the Python binding headers module.cpp needs
#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

void check_fp32(const torch::Tensor& t, const char* name, int64_t dim);  // rowdot.cpp

namespace {

float softplus(float x) { return x > 20.f ? x : std::log1p(std::exp(x)); }  // torch's threshold

void unit(float* x, int64_t n, float scale) {  // x ← x / sqrt(Σx² + 1e-6) · scale
  float ss = 0.f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.f / std::sqrt(ss + 1e-6f);
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * r * scale;
}

}  // namespace

// qkv (B, C) one token's in_proj_qkv output; conv_w (C, Kc); conv (B, C, Kc−1) the window, shifted in place;
// b, a (B, H); A_log, dt_bias (H); S (B, H, dk, dv) updated in place; Hk key heads. Returns o (B, H, dv) fp32.
torch::Tensor delta_decode(torch::Tensor qkv, torch::Tensor conv_w, torch::Tensor conv, torch::Tensor b,
                           torch::Tensor a, torch::Tensor A_log, torch::Tensor dt_bias, torch::Tensor S, int64_t Hk) {
  check_fp32(qkv, "qkv", 2), check_fp32(conv_w, "conv_w", 2), check_fp32(conv, "conv", 3), check_fp32(b, "b", 2);
  check_fp32(a, "a", 2), check_fp32(A_log, "A_log", 1), check_fp32(dt_bias, "dt_bias", 1), check_fp32(S, "S", 4);
  const int64_t B = qkv.size(0), C = qkv.size(1), Kc = conv_w.size(1);
  const int64_t H = S.size(1), dk = S.size(2), dv = S.size(3);
  TORCH_CHECK(Hk > 0 && H % Hk == 0 && C == 2 * Hk * dk + H * dv, "qkv has ", C, " channels; ", Hk, " key heads of ",
              dk, " and ", H, " value heads of ", dv, " need 2·Hk·dk + H·dv = ", 2 * Hk * dk + H * dv);
  TORCH_CHECK(conv_w.size(0) == C && conv.size(0) == B && conv.size(1) == C && conv.size(2) == Kc - 1,
              "the conv's window must be (B, C, K−1) for a (C, K) kernel");
  TORCH_CHECK(b.size(0) == B && b.size(1) == H && a.size(0) == B && a.size(1) == H && A_log.size(0) == H &&
              dt_bias.size(0) == H && S.size(0) == B, "b, a (B, H), A_log and dt_bias (H) must match S's heads");

  // conv, silu and the heads: C numbers a token, done before the state is touched; the conv's channels split
  // across threads (on one, it took some 30 µs of a layer's 105 here: C = 6144 on the 0.8B)
  auto u = torch::empty({B, C}, torch::kFloat32);
  float *up = u.data_ptr<float>(), *win = conv.data_ptr<float>();
  const float *xp = qkv.data_ptr<float>(), *wp = conv_w.data_ptr<float>();
  at::parallel_for(0, B * C, 512, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {  // channel nc % C of token row nc / C
      float* past = win + nc * (Kc - 1);  // the K−1 inputs before this one, oldest first
      const float* w = wp + (nc % C) * Kc;
      const float x = xp[nc];
      float acc = w[0] * (Kc > 1 ? past[0] : x);
      for (int64_t i = 1; i < Kc; ++i) acc += w[i] * (i < Kc - 1 ? past[i] : x);
      for (int64_t i = 0; i + 1 < Kc - 1; ++i) past[i] = past[i + 1];  // the window moves on by one
      if (Kc > 1) past[Kc - 2] = x;
      up[nc] = acc;
    }
  });
  at::silu_(u);  // torch's own silu, vectorised (std::exp one number at a time took a fifth of the step)
  for (int64_t n = 0; n < B; ++n)
    for (int64_t h = 0; h < Hk; ++h) {
      unit(up + n * C + h * dk, dk, 1.f / std::sqrt(static_cast<float>(dk)));  // q
      unit(up + n * C + (Hk + h) * dk, dk, 1.f);                                // k
    }

  auto o = torch::zeros({B, H, dv}, torch::kFloat32);
  float *op = o.data_ptr<float>(), *sp = S.data_ptr<float>();
  const float *bp = b.data_ptr<float>(), *ap = a.data_ptr<float>();
  const float *Alp = A_log.data_ptr<float>(), *dtp = dt_bias.data_ptr<float>();
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> p(dv);
    for (int64_t nh = begin; nh < end; ++nh) {
      const int64_t n = nh / H, h = nh % H, kh = h / (H / Hk);
      const float* q = up + n * C + kh * dk;
      const float* k = up + n * C + (Hk + kh) * dk;
      const float* v = up + n * C + 2 * Hk * dk + h * dv;
      const float beta = 1.f / (1.f + std::exp(-bp[nh]));
      const float decay = std::exp(-std::exp(Alp[h]) * softplus(ap[nh] + dtp[h]));
      float* Sh = sp + nh * dk * dv;  // (dk, dv)
      float* out = op + nh * dv;
      std::fill(p.begin(), p.end(), 0.f);
      for (int64_t i = 0; i < dk; ++i) {  // pass 1: forget, and p = Sᵀk
        float* row = Sh + i * dv;
        for (int64_t j = 0; j < dv; ++j) {
          row[j] *= decay;
          p[j] += k[i] * row[j];
        }
      }
      for (int64_t j = 0; j < dv; ++j) p[j] = beta * (v[j] - p[j]);  // now the correction β(v − Sᵀk)
      for (int64_t i = 0; i < dk; ++i) {  // pass 2: write k ⊗ correction, and read o = Sᵀq
        float* row = Sh + i * dv;
        for (int64_t j = 0; j < dv; ++j) {
          row[j] += k[i] * p[j];
          out[j] += q[i] * row[j];
        }
      }
    }
  });
  return o;
}
