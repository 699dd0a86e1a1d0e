// A bf16 decoder layer's decode step as one call: the same torch calls the layer's modules make, made from C++.
//
// The bf16 fast model keeps transformers' bits on a batch (tests/test_fast.py holds its cached decode to
// transformers', step by step), so its products of two rows and more are oneDNN's, summed as transformers' are (one
// row: bf16rows.cpp's dot where it is built, as qwen/products.py chooses), and its DeltaNet step must round where
// transformers' step rounds: it cannot be rewritten by hand as chapter 13's fp32 model's is. What can go is the
// interpreter between those calls: some 60 torch calls a layer, each a few microseconds of Python, about a tenth of
// a bf16 decode step on the 0.8B. Here they follow each other in C++, the same functions with the same arguments in
// the same order (qwen/norm.py's RMSNorm and GatedRMSNorm, qwen/kernels.py's conv_silu, delta_step and
// grouped_attention, qwen/deltanet.py's split_heads and gates, qwen/attention.py's heads and gate_heads, qwen/rope.py's
// apply_rope, qwen/products.py's read_product, qwen/fast.py's FastLayer, FastAttention and FastMLP), so the result
// is theirs bit for bit (tests/test_layerstep.py).
#include <torch/types.h>  // ATen and torch::Tensor, without the Python binding headers module.cpp needs

#include <ATen/core/dispatch/Dispatcher.h>

#include <cmath>

torch::Tensor bf16_rows(torch::Tensor x, torch::Tensor w);  // bf16rows.cpp

namespace {

// x Wᵀ from what qwen/products.py's PackedLinear.reads gives: a packed copy (oneDNN's product, as torch.ops calls
// it), or the bf16 weight itself (bf16rows.cpp's dot), as read_product chooses
torch::Tensor read_product(const torch::Tensor& x, const torch::Tensor& w) {
  if (!w.is_mkldnn()) {
    auto shape = x.sizes().vec();
    shape.back() = w.size(0);
    return bf16_rows(x.reshape({-1, x.size(-1)}).contiguous(), w).view(shape);
  }
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mkldnn::_linear_pointwise", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                         c10::string_view, c10::List<std::optional<at::Scalar>>,
                                         std::optional<c10::string_view>)>();
  return op.call(x, w, std::nullopt, "none", c10::List<std::optional<at::Scalar>>(), "");
}

torch::Tensor rms_normalize(const torch::Tensor& x, double eps) {  // qwen/norm.py's, in fp32
  auto xf = x.to(torch::kFloat32);
  return xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps);
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {  // RMSNorm: (1 + w), one rounding
  return (rms_normalize(x, eps) * (1 + w.to(torch::kFloat32))).to(x.scalar_type());
}

torch::Tensor l2norm(const torch::Tensor& x) { return x * torch::rsqrt((x * x).sum(-1, true) + 1e-6); }

void mlp_add(torch::Tensor& y, const torch::Tensor& post_w, double post_eps, const torch::Tensor& gate_up, int64_t F,
             const torch::Tensor& down) {  // FastMLP: y += W_down (silu(g) ⊙ u), [g | u] = W_gate|up · RMSNorm(y)
  auto gu = read_product(rms_norm(y, post_w, post_eps), gate_up).split_with_sizes({F, F}, -1);
  torch::silu_(gu[0]).mul_(gu[1]);
  y += read_product(gu[0], down);
}

}  // namespace

torch::Tensor rope(torch::Tensor x, torch::Tensor cos, torch::Tensor sin);  // layerstep.cpp: apply_rope, one position

// x (B, 1, D) bf16; conv (B, C, Kc−1) and S (B, H, dk, dv) fp32 the cache's (conv is replaced: returned second);
// the weights as qwen/kernel.py's packed_delta_layer passes them (what the projections' products read: their packed
// copies, or for one bf16 row the weights themselves). Returns the layer's output (B, 1, D) and the new conv window.
std::vector<torch::Tensor> bf16_delta_layer(torch::Tensor x, torch::Tensor conv, torch::Tensor S, torch::Tensor norm_w,
                                            double eps, torch::Tensor in_proj, torch::Tensor conv_w,
                                            torch::Tensor A_log, torch::Tensor dt_bias, int64_t Hk, int64_t dk,
                                            torch::Tensor gate_w, double gate_eps, torch::Tensor out_proj,
                                            torch::Tensor post_w, double post_eps, torch::Tensor gate_up, int64_t F,
                                            torch::Tensor down) {
  const int64_t B = x.size(0), H = S.size(1), dv = S.size(3), C = conv_w.size(0), Kc = conv_w.size(2);
  const auto dtype = x.scalar_type();
  // the mixer: [qkv | z | b | a] = W_in · RMSNorm(x)
  auto p = read_product(rms_norm(x, norm_w, eps), in_proj);  // (B, 1, C + Z + 2H)
  auto parts = p.split_with_sizes({C, H * dv, H, H}, -1);
  auto qkv = parts[0], z = parts[1], b = parts[2], a = parts[3];
  // conv_silu: the window and this token, the Kc products summed in fp32, rounded once, then silu
  auto xs = torch::cat({conv.transpose(1, 2), qkv}, 1).to(torch::kFloat32);  // (B, Kc, C)
  auto w = conv_w.select(1, 0).to(torch::kFloat32).t();                       // (Kc, C)
  auto u = xs.narrow(1, 0, 1) * w[0];
  for (int64_t i = 1; i < Kc; ++i) u.addcmul_(xs.narrow(1, i, 1), w[i]);
  u = u.to(dtype);
  torch::silu_(u);
  auto window = xs.narrow(1, 1, Kc - 1).to(dtype).transpose(1, 2).contiguous();  // (B, C, Kc−1)
  // split_heads (no scale), then q / √dk as transformers' step divides
  auto qkv_u = u.split_with_sizes({Hk * dk, Hk * dk, H * dv}, -1);
  auto q = l2norm(qkv_u[0].reshape({B, 1, Hk, dk}).to(torch::kFloat32)) / std::pow(static_cast<double>(dk), 0.5);
  auto k = l2norm(qkv_u[1].reshape({B, 1, Hk, dk}).to(torch::kFloat32));
  auto v = qkv_u[2].reshape({B, 1, H, dv});
  // gates: β = sigmoid(b), g = −e^A_log · softplus(a + dt_bias)
  auto beta = b.sigmoid();
  auto g = -A_log.to(torch::kFloat32).exp() * torch::softplus(a.to(torch::kFloat32) + dt_bias.to(torch::kFloat32));
  // delta_step on S in place
  auto qh = q.select(1, 0).repeat_interleave(H / Hk, 1).unsqueeze(-1);  // (B, H, dk, 1)
  auto kh = k.select(1, 0).repeat_interleave(H / Hk, 1).unsqueeze(-1);
  S.mul_(g.select(1, 0).unsqueeze(-1).unsqueeze(-1).exp());
  auto delta = (v.select(1, 0).to(torch::kFloat32) - (S * kh).sum(-2)) *
               beta.select(1, 0).unsqueeze(-1).to(torch::kFloat32);  // (B, H, dv)
  S.add_(kh * delta.unsqueeze(2));
  auto o = (S * qh).sum(-2).unsqueeze(1).to(dtype);  // (B, 1, H, dv)
  // output: GatedRMSNorm (transformers' roundings), then W_out
  auto n = gate_w * rms_normalize(o, gate_eps).to(dtype);
  auto normed = (n * torch::silu(z.reshape({B, 1, H, dv}).to(torch::kFloat32))).to(dtype);
  auto y = x + read_product(normed.reshape({B, 1, H * dv}), out_proj);
  mlp_add(y, post_w, post_eps, gate_up, F, down);
  return {y, window};
}

// x (B, 1, D) bf16; cos, sin (B, 1, R); keys, values (B, Hkv, capacity, Dh), the cache's, with room at `length`, where
// this token's are written (the caller moves the length on); the weights as qwen/kernel.py's packed_attention_layer
// passes them (as bf16_delta_layer's). Returns the layer's output (B, 1, D).
torch::Tensor bf16_attention_layer(torch::Tensor x, torch::Tensor cos, torch::Tensor sin, torch::Tensor keys,
                                   torch::Tensor values, int64_t length, torch::Tensor norm_w, double eps,
                                   torch::Tensor qkv, int64_t H, torch::Tensor q_w, torch::Tensor k_w, double qk_eps,
                                   torch::Tensor out_proj, torch::Tensor post_w, double post_eps,
                                   torch::Tensor gate_up, int64_t F, torch::Tensor down) {
  const int64_t B = x.size(0), Hkv = keys.size(1), Dh = keys.size(3), S = length + 1;
  TORCH_CHECK(length >= 1 && S <= keys.size(2), "the cache needs a token before and room for this one");
  // heads: [q, gate | k | v] = W_qkv · RMSNorm(x), each head's query and gate side by side; q and k normed per head,
  // then turned; v as it is
  auto p = read_product(rms_norm(x, norm_w, eps), qkv).split_with_sizes({2 * H * Dh, Hkv * Dh, Hkv * Dh}, -1);
  auto qg = p[0].view({B, 1, H, 2 * Dh}).split(Dh, -1);
  auto q = rope(rms_norm(qg[0], q_w, qk_eps).transpose(1, 2), cos, sin);                            // (B, H, 1, Dh)
  auto k = rope(rms_norm(p[1].view({B, 1, Hkv, Dh}), k_w, qk_eps).transpose(1, 2), cos, sin);  // (B, Hkv, 1, Dh)
  keys.narrow(2, length, 1).copy_(k);
  values.narrow(2, length, 1).copy_(p[2].view({B, 1, Hkv, Dh}).transpose(1, 2));
  // grouped_attention: each K/V head's H/Hkv query heads as rows of one head, then the gate
  auto out = at::scaled_dot_product_attention(q.reshape({B, Hkv, H / Hkv, Dh}), keys.narrow(2, 0, S),
                                              values.narrow(2, 0, S)).view({B, H, 1, Dh});
  auto gated = out.transpose(1, 2).reshape({B, 1, H * Dh}) * torch::sigmoid(qg[1].reshape({B, 1, H * Dh}));
  auto y = x + read_product(gated, out_proj);
  mlp_add(y, post_w, post_eps, gate_up, F, down);
  return y;
}
