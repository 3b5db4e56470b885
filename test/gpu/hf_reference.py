"""Writes a random-weight model with transformers' own classes and its teacher-forced logits.

Usage (GPU machine): python3 test/gpu/hf_reference.py OUT_DIR {qwen3|llama} [num_tokens]
OUT_DIR gets the save_pretrained() model, tokens.json and logits.f32 ([num_tokens, vocab] float32,
transformers' forward in fp32 over the saved bf16 weights): the reference for hf_parity.ts.
"""
import json
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

out, arch = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 600
torch.manual_seed(0)
common = dict(vocab_size=32000, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
              num_attention_heads=8, num_key_value_heads=4, head_dim=64, max_position_embeddings=4096,
              rms_norm_eps=1e-6, initializer_range=0.02)
if arch == "qwen3":
    cfg = Qwen3Config(**common, rope_theta=1000000.0, tie_word_embeddings=True)
    model = Qwen3ForCausalLM(cfg)
else:
    cfg = LlamaConfig(**common, rope_theta=500000.0, tie_word_embeddings=False,
                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 1024})
    model = LlamaForCausalLM(cfg)
# Norm weights of 1 make q/k-norm and the final norm trivial; perturb them so they are tested.
with torch.no_grad():
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.uniform_(0.5, 1.5)
model = model.to(torch.bfloat16)
model.save_pretrained(out, safe_serialization=True)
tokens = torch.randint(0, cfg.vocab_size, (n,), generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    # transformers' own bf16 forward against its fp32 one: the noise floor any bf16 engine shares.
    bf16 = model.cuda().eval()(tokens[None].cuda()).logits[0].float().cpu()
    ref = model.to(torch.float32).cuda().eval()
    logits = ref(tokens[None].cuda()).logits[0].float().cpu()
rel = (torch.linalg.norm(bf16 - logits) / torch.linalg.norm(logits)).item()
top1 = (bf16.argmax(-1) == logits.argmax(-1)).float().mean().item()
print(f"hf_reference: transformers bf16 vs fp32 forward: rel. L2 {rel:.4f}, top-1 agreement {top1:.4f}")
logits.numpy().tofile(f"{out}/logits.f32")
json.dump({"tokens": tokens.tolist(), "vocab": cfg.vocab_size}, open(f"{out}/tokens.json", "w"))
print(f"hf_reference: {arch} -> {out} ({n} tokens)")
