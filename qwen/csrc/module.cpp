// The Python names of the C++ functions in this folder: qwen/kernel.py builds the files as one torch extension.
//
//   rowdot.cpp     the one-row product, step by step: fp32 and bf16 loops, Q8_0 and Q4_0 blocks (portable, AVX2)
//   rows8.cpp      the Q8_0 and Q4_0 block sums eight weight rows at a time (the live model's products)
//   deltastep.cpp  one token through a DeltaNet layer's memory (the live model's decode step)
//   norms.cpp      RMSNorm and the gated RMSNorm of a few rows, each in one call (the live model's norms)
//   layerstep.cpp  a decoder layer's decode step, the calls between the products in C++ (the live model's layers)
//   bf16step.cpp   a bf16 decoder layer's decode step as one call of torch's own ops (the packed bf16 model's)
//   bf16rows.cpp   a bf16 product of a few rows with the CPU's bf16 dot (the bf16 fast model's decode products)
//   pages.cpp      a copy of a weight on 2 MiB pages (the live model's blocks)
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>  // pybind11 with torch's Tensor casters: lighter than torch/extension.h

torch::Tensor quantize_q8_0(torch::Tensor x);  // rowdot.cpp
torch::Tensor rowdot_fp32(torch::Tensor x, torch::Tensor w, bool vector);
torch::Tensor rowdot_bf16(torch::Tensor x, torch::Tensor w);
torch::Tensor rowdot_q8_0(torch::Tensor x, torch::Tensor w, bool avx2);
torch::Tensor rowdot_q4_0(torch::Tensor x, torch::Tensor w, bool avx2);
bool rowdot_avx2();
torch::Tensor rowdot_rows8(torch::Tensor x, torch::Tensor w, int64_t N, bool q4);  // rows8.cpp
bool rows8_runs();
bool rows8_vnni();
torch::Tensor delta_decode(torch::Tensor qkv, torch::Tensor conv_w, torch::Tensor conv, torch::Tensor b,  // deltastep
                           torch::Tensor a, torch::Tensor A_log, torch::Tensor dt_bias, torch::Tensor S, int64_t Hk);
torch::Tensor rms_norm(torch::Tensor x, torch::Tensor w, double eps, double shift);  // norms.cpp
torch::Tensor gated_rms_norm(torch::Tensor x, torch::Tensor z, torch::Tensor w, double eps);
void mlp_add(torch::Tensor y, torch::Tensor norm_w, double eps, torch::Tensor gate_up, int64_t F, torch::Tensor down,
             bool q4);  // layerstep.cpp
torch::Tensor delta_layer(torch::Tensor x, torch::Tensor conv, torch::Tensor S, torch::Tensor norm_w, double eps,
                          torch::Tensor in_proj, torch::Tensor conv_w, torch::Tensor A_log, torch::Tensor dt_bias,
                          int64_t Hk, torch::Tensor gate_w, double gate_eps, torch::Tensor out_proj,
                          torch::Tensor post_w, double post_eps, torch::Tensor gate_up, int64_t F, torch::Tensor down,
                          bool q4);
torch::Tensor attention_layer(torch::Tensor x, torch::Tensor cos, torch::Tensor sin, torch::Tensor keys,
                              torch::Tensor values, int64_t length, torch::Tensor norm_w, double eps, torch::Tensor qkv,
                              int64_t H, torch::Tensor q_w, torch::Tensor k_w, double qk_eps, torch::Tensor out_proj,
                              torch::Tensor post_w, double post_eps, torch::Tensor gate_up, int64_t F,
                              torch::Tensor down, bool q4);
std::vector<torch::Tensor> bf16_delta_layer(torch::Tensor x, torch::Tensor conv, torch::Tensor S, torch::Tensor norm_w,
                                            double eps, torch::Tensor in_proj, torch::Tensor conv_w,
                                            torch::Tensor A_log, torch::Tensor dt_bias, int64_t Hk, int64_t dk,
                                            torch::Tensor gate_w, double gate_eps, torch::Tensor out_proj,
                                            torch::Tensor post_w, double post_eps, torch::Tensor gate_up, int64_t F,
                                            torch::Tensor down);  // bf16step.cpp
torch::Tensor bf16_attention_layer(torch::Tensor x, torch::Tensor cos, torch::Tensor sin, torch::Tensor keys,
                                   torch::Tensor values, int64_t length, torch::Tensor norm_w, double eps,
                                   torch::Tensor qkv, int64_t H, torch::Tensor q_w, torch::Tensor k_w, double qk_eps,
                                   torch::Tensor out_proj, torch::Tensor post_w, double post_eps,
                                   torch::Tensor gate_up, int64_t F, torch::Tensor down);
torch::Tensor on_huge_pages(torch::Tensor t);  // pages.cpp
torch::Tensor bf16_rows(torch::Tensor x, torch::Tensor w);  // bf16rows.cpp
bool bf16_rows_run();

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("quantize_q8_0", &quantize_q8_0, "x (M, K) fp32 -> its Q8_0 blocks (M, K/32*34) uint8");
  m.def("rowdot_fp32", &rowdot_fp32, "x (M, K) fp32, w (N, K) fp32, vector -> x W^T (M, N)");
  m.def("rowdot_bf16", &rowdot_bf16, "x (M, K) fp32, w (N, K) bf16 -> x W^T (M, N) fp32");
  m.def("rowdot_q8_0", &rowdot_q8_0, "x (M, K) fp32, w Q8_0 blocks (N, K/32*34) uint8, avx2 -> (M, N) fp32");
  m.def("rowdot_q4_0", &rowdot_q4_0, "x (M, K) fp32, w Q4_0 blocks (N, K/32*18) uint8, avx2 -> (M, N) fp32");
  m.def("rowdot_rows8", &rowdot_rows8, "x (M, K) fp32, w grouped blocks (N/8, K/32*8*bytes) uint8, N, q4 -> (M, N)");
  m.def("delta_decode", &delta_decode, "one token through a DeltaNet layer's conv, gates and delta rule, in place");
  m.def("rms_norm", &rms_norm, "x (R, D), w (D), eps, shift -> x / rms(x) * (shift + w), fp32");
  m.def("gated_rms_norm", &gated_rms_norm, "x, z (R, D), w (D), eps -> w * x / rms(x) * silu(z), fp32");
  m.def("mlp_add", &mlp_add, "y (B, D) += the MLP of rms_norm(y), in place");
  m.def("delta_layer", &delta_layer, "x (B, D) -> a DeltaNet decoder layer's output for one token, cache in place");
  m.def("attention_layer", &attention_layer, "x (B, D) -> an attention decoder layer's output for one token, cached");
  m.def("bf16_delta_layer", &bf16_delta_layer, "x (B, 1, D) -> a packed DeltaNet layer's output and conv window");
  m.def("bf16_attention_layer", &bf16_attention_layer, "x (B, 1, D) -> a packed attention layer's output, cached");
  m.def("bf16_rows", &bf16_rows, "x (M, K) bf16, w (N, K) bf16 -> x W^T (M, N) bf16, summed in fp32");
  m.def("on_huge_pages", &on_huge_pages, "t -> a copy of t on 2 MiB pages (Linux), else t itself");
  m.attr("avx2") = rowdot_avx2();
  m.attr("rows8") = rows8_runs();
  m.attr("vnni") = rows8_vnni();
  m.attr("bf16_dot") = bf16_rows_run();
#ifdef _OPENMP
  m.attr("threads") = true;
#else
  m.attr("threads") = false;
#endif
}
