// A decoder layer's decode step with no Python between its calls: the last of chapter 13's live model.
//
// Once the products stream the weights at the memory's rate (rows8.cpp) and the DeltaNet step and the norms are one
// call each (deltastep.cpp, norms.cpp), what is left of a decode step is the Python that hands one call's output to
// the next: a module's forward, a reshape, a split, a check of the dtype, an add. Each is a few microseconds, and a
// layer of the 0.8B takes some 60 of them; over 24 layers that is a tenth of a Q8_0 step, during which the memory
// streams nothing. Here the same calls follow each other in C++:
//
//   mlp_add          y ← y + W_down · (silu(g) ⊙ u),  [g | u] = W_gate|up · rms_norm(y)      (y in place)
//   delta_layer      y = x + W_out · gated_norm(o, z),  [qkv | z | b | a] = W_in · rms_norm(x), o = the memory's
//                    step (deltastep.cpp); then mlp_add(y)
//   attention_layer  y = x + W_out · (attention(q, K, V) ⊙ sigmoid(gate)),  [q, gate | k | v] = W_qkv · rms_norm(x),
//                    q and k normed per head and turned (RoPE), k and v written into the cache; then mlp_add(y)
//
// The functions and the order are the Python path's (qwen/fast.py's FastLayer with qwen/kernels.py's norms and
// fused_remember; the products rows8.cpp's, torch's silu and mul), so a step here is that path's bit for bit
// (tests/test_layerstep.py). x (B, D) fp32, one token of each of B sequences; the weights in the eight-row layout.
#include <torch/types.h>  // ATen and torch::Tensor, without the Python binding headers module.cpp needs

torch::Tensor rowdot_rows8(torch::Tensor x, torch::Tensor w, int64_t N, bool q4);  // rows8.cpp
torch::Tensor delta_decode(torch::Tensor qkv, torch::Tensor conv_w, torch::Tensor conv, torch::Tensor b,  // deltastep
                           torch::Tensor a, torch::Tensor A_log, torch::Tensor dt_bias, torch::Tensor S, int64_t Hk);
torch::Tensor rms_norm(torch::Tensor x, torch::Tensor w, double eps, double shift);  // norms.cpp
torch::Tensor gated_rms_norm(torch::Tensor x, torch::Tensor z, torch::Tensor w, double eps);

// y (B, D) updated in place; norm_w, eps the post-attention norm's; gate_up (2F rows: gate's F, then up's F), down
// (D rows)
void mlp_add(torch::Tensor y, torch::Tensor norm_w, double eps, torch::Tensor gate_up, int64_t F, torch::Tensor down,
             bool q4) {
  auto gu = rowdot_rows8(rms_norm(y, norm_w, eps, 1.0), gate_up, 2 * F, q4);  // (B, 2F)
  auto g = gu.narrow(1, 0, F);
  at::silu_(g).mul_(gu.narrow(1, F, F));
  y.add_(rowdot_rows8(g.contiguous(), down, y.size(1), q4));
}

// x (B, D); conv (B, C, Kc−1) and S (B, H, dk, dv), its cache's, updated in place; norm_w, eps the input norm's;
// in_proj (C + Z + 2H rows); conv_w (C, 1, Kc); out_proj (D rows); then the MLP's, as mlp_add takes them. Returns the
// layer's output (B, D), a new tensor: y = x + the DeltaNet mixer's output, then y += the MLP's.
torch::Tensor delta_layer(torch::Tensor x, torch::Tensor conv, torch::Tensor S, torch::Tensor norm_w, double eps,
                          torch::Tensor in_proj, torch::Tensor conv_w, torch::Tensor A_log, torch::Tensor dt_bias,
                          int64_t Hk, torch::Tensor gate_w, double gate_eps, torch::Tensor out_proj,
                          torch::Tensor post_w, double post_eps, torch::Tensor gate_up, int64_t F, torch::Tensor down,
                          bool q4) {
  const int64_t B = x.size(0), D = x.size(1), H = S.size(1), dv = S.size(3), C = conv_w.size(0), Z = H * dv;
  auto p = rowdot_rows8(rms_norm(x, norm_w, eps, 1.0), in_proj, C + Z + 2 * H, q4);  // (B, C + Z + 2H)
  auto o = delta_decode(p.narrow(1, 0, C).contiguous(), conv_w.select(1, 0), conv, p.narrow(1, C + Z, H).contiguous(),
                        p.narrow(1, C + Z + H, H).contiguous(), A_log, dt_bias, S, Hk);  // (B, H, dv)
  auto z = p.narrow(1, C, Z).contiguous().view({-1, dv});                               // (B·H, dv)
  auto y = x + rowdot_rows8(gated_rms_norm(o.view({-1, dv}), z, gate_w, gate_eps).view({B, Z}), out_proj, D, q4);
  mlp_add(y, post_w, post_eps, gate_up, F, down, q4);
  return y;
}

// qwen/rope.py's apply_rope for one position (bf16step.cpp's attention step calls it too)
torch::Tensor rope(torch::Tensor x, torch::Tensor cos, torch::Tensor sin) {  // x (B, h, 1, Dh); cos, sin (B, 1, R)
  const int64_t R = cos.size(-1);
  auto c = cos.unsqueeze(1), s = sin.unsqueeze(1);  // (B, 1, 1, R): every head turns by the same angles
  auto xr = x.narrow(-1, 0, R);
  auto half = xr.chunk(2, -1);
  auto turned = at::cat({half[1].neg(), half[0]}, -1);  // (x1, x2) -> (−x2, x1)
  return at::cat({xr * c + turned * s, x.narrow(-1, R, x.size(-1) - R)}, -1);
}

namespace {

torch::Tensor head_norm(torch::Tensor x, torch::Tensor w, double eps, int64_t h) {  // x (B, h·Dh) -> (B, h, 1, Dh)
  const int64_t Dh = w.size(0);
  return rms_norm(x.reshape({-1, Dh}).contiguous(), w, eps, 1.0).view({x.size(0), 1, h, Dh}).transpose(1, 2);
}

}  // namespace

// x (B, D); cos, sin (B, 1, R); keys, values (B, Hkv, capacity, Dh), the cache's, with room at `length`, where this
// token's are written; norm_w, eps the input norm's; qkv (H·2Dh + 2·Hkv·Dh rows: each head's query and gate, then
// keys, then values); q_w, k_w (Dh) the heads' norms; out_proj (D rows); then the MLP's, as mlp_add takes them.
// Returns the layer's output (B, D), a new tensor: y = x + the gated attention's output, then y += the MLP's.
torch::Tensor attention_layer(torch::Tensor x, torch::Tensor cos, torch::Tensor sin, torch::Tensor keys,
                              torch::Tensor values, int64_t length, torch::Tensor norm_w, double eps, torch::Tensor qkv,
                              int64_t H, torch::Tensor q_w, torch::Tensor k_w, double qk_eps, torch::Tensor out_proj,
                              torch::Tensor post_w, double post_eps, torch::Tensor gate_up, int64_t F,
                              torch::Tensor down, bool q4) {
  const int64_t B = x.size(0), D = x.size(1), Hkv = keys.size(1), Dh = keys.size(3), S = length + 1;
  TORCH_CHECK(length >= 1 && S <= keys.size(2), "the cache needs a token before and room for this one");
  auto p = rowdot_rows8(rms_norm(x, norm_w, eps, 1.0), qkv, 2 * H * Dh + 2 * Hkv * Dh, q4);  // (B, ·)
  auto qg = p.narrow(1, 0, 2 * H * Dh).view({B, 1, H, 2 * Dh});  // per head: [query | gate]
  auto q = rope(head_norm(qg.narrow(3, 0, Dh), q_w, qk_eps, H), cos, sin);               // (B, H, 1, Dh)
  auto k = rope(head_norm(p.narrow(1, 2 * H * Dh, Hkv * Dh), k_w, qk_eps, Hkv), cos, sin);  // (B, Hkv, 1, Dh)
  auto v = p.narrow(1, 2 * H * Dh + Hkv * Dh, Hkv * Dh).view({B, 1, Hkv, Dh}).transpose(1, 2);
  keys.narrow(2, length, 1).copy_(k);
  values.narrow(2, length, 1).copy_(v);
  // each K/V head's H/Hkv query heads as rows of one head: its keys read once (qwen/kernels.py's grouped_attention)
  auto out = at::scaled_dot_product_attention(q.reshape({B, Hkv, H / Hkv, Dh}), keys.narrow(2, 0, S),
                                              values.narrow(2, 0, S));
  auto gated = out.view({B, H, 1, Dh}).transpose(1, 2).reshape({B, 1, H * Dh}) *
               at::sigmoid(qg.narrow(3, Dh, Dh).reshape({B, 1, H * Dh}));  // each output opened 0..1 by its gate
  auto y = x + rowdot_rows8(gated.reshape({B, H * Dh}).contiguous(), out_proj, D, q4);
  mlp_add(y, post_w, post_eps, gate_up, F, down, q4);
  return y;
}
