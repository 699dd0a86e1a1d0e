"""Qwen3.5 by hand: the model, one idea per module. Import what you need from its module (`from qwen.model import
load_model`): `import qwen` alone imports nothing, so a script that needs the language setting does not wait for
torch, and a chapter reads only the modules it names.

PUBLIC below is the supported API: the names a learner, a chapter or the terminal chat uses, per module ("Class.method"
for a method). Each one is fully annotated (every parameter and the return) and checked by mypy
(`python -m mypy`, configured in pyproject.toml); tests/test_types.py proves both. Everything else in qwen/ is a
helper of its module: readable, but free to change. A name moves in here when code outside qwen/ starts to call it.
"""

PUBLIC: dict[str, tuple[str, ...]] = {
    # the language, the checkpoint and the command line (chapter 1)
    "qwen.lang": ("tr", "use", "language", "from_command_line"),
    "qwen.config": ("Config", "Config.load", "Config.from_dict", "VisionConfig", "VisionConfig.from_dict", "dtype_of",
                    "DTYPES", "DEFAULT_MODEL"),
    "qwen.hub": ("find_model", "ModelNotFound", "DATA_DIR"),
    "qwen.synthetic": ("synthetic_path", "is_synthetic", "banner"),
    "qwen.course": ("open_model", "pick_device", "chapter_args", "chapter_parser"),
    "qwen.checkpoint": ("Checkpoint", "open_checkpoint"),
    "qwen.weights": ("Weights", "fill", "read_header"),
    # the text model, part by part (chapters 2 to 8)
    "qwen.tokenizer": ("Tokenizer", "Tokenizer.encode", "Tokenizer.decode", "Tokenizer.id_to_token",
                       "Tokenizer.token_to_id", "load_tokenizer"),
    "qwen.embedding": ("Embedding", "Embedding.forward", "head_logits"),
    "qwen.norm": ("RMSNorm", "RMSNorm.forward", "GatedRMSNorm", "GatedRMSNorm.forward", "rms_normalize", "l2norm"),
    "qwen.rope": ("RotaryEmbedding", "RotaryEmbedding.forward", "apply_rope", "mrope_axes"),
    "qwen.mlp": ("MLP", "MLP.forward"),
    "qwen.attention": ("GatedAttention", "GatedAttention.forward", "KVCache", "KVCache.update", "attention",
                       "causal_mask"),
    "qwen.deltanet": ("GatedDeltaNet", "GatedDeltaNet.forward", "DeltaNetCache", "causal_conv",
                      "recurrent_delta_rule", "chunked_delta_rule"),
    "qwen.model": ("Qwen35", "Qwen35.forward", "Qwen35.new_cache", "DecoderLayer", "DecoderLayer.forward", "Cache",
                   "load_model"),
    # generation, the chat and the fast path (chapter 9)
    "qwen.sampling": ("Sampling", "Sampling.card", "Sampling.but", "CARD", "filter_logits"),
    "qwen.generate": ("generate", "pad_left", "TextStream", "TextStream.push", "TextStream.flush"),
    "qwen.chat": ("render", "default_thinking"),
    "qwen.session": ("Session", "Session.respond", "Session.attach", "Session.drop_pending", "Session.reset"),
    "qwen.fast": ("Fast", "load_fast"),
    "qwen.measure": ("timed", "next_token_kl"),
    # images (chapter 10)
    "qwen.image": ("ImageSettings", "ImageSettings.load", "load_image", "preprocess", "smart_resize", "to_rgb"),
    "qwen.vision": ("VisionTower", "VisionTower.forward", "load_vision", "merge_order"),
    "qwen.mrope": ("position_ids", "expand_image_tokens", "tokens_per_image"),
    # multi-token prediction and speculative decoding (chapter 11)
    "qwen.mtp": ("MTP", "load_mtp", "step", "new_cache", "FinalHidden"),
    "qwen.draft": ("Draft", "MTPDraft", "Scripted", "follow"),
    "qwen.speculative": ("speculate", "Rollback", "Rollback.keep", "accept"),
    # fewer bits (chapter 12)
    "qwen.quant": ("quantize_int8", "dequantize_int8", "quantize_int4", "dequantize_int4", "quantize_int4_zero",
                   "dequantize_int4_zero", "bits_per_weight"),
    "qwen.quantized": ("quantize_model", "fake_quantize", "describe"),
    "qwen.products": ("numerics", "can_pack", "bf16_is_native"),
}
