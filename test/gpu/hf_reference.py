"""Writes a random-weight model with transformers' own classes and its teacher-forced logits.

Usage (GPU machine): python3 test/gpu/hf_reference.py OUT_DIR {qwen3|llama} [num_tokens]
OUT_DIR gets the save_pretrained() bf16 model, tokens.json and logits.f32 ([num_tokens, vocab]
float32: transformers' fp32 forward of that model as from_pretrained loads it, on the CPU): the
reference for hf_parity.ts.
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
model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
# The reference is the saved model loaded the way users load it. Casting the bf16 model back with
# .to(float32) would not do: .to() casts buffers too, so RoPE's inv_freq would keep bf16 values
# (off by up to 0.4%, i.e. up to a few radians at position 600).
torch.backends.cuda.matmul.allow_tf32 = False
tokens = torch.randint(0, cfg.vocab_size, (n,), generator=torch.Generator().manual_seed(1))
cls = type(model)
with torch.no_grad():
    ref = cls.from_pretrained(out, torch_dtype=torch.float32).eval()  # fp32 on the CPU: plain IEEE arithmetic
    logits = ref(tokens[None]).logits[0].float()
    # transformers' own bf16 forward on the GPU: the noise floor any bf16 engine shares.
    bf16 = cls.from_pretrained(out, torch_dtype=torch.bfloat16).cuda().eval()(tokens[None].cuda()).logits[0].float().cpu()
    # What the earlier reference did (bf16 model cast back to fp32), to show how far that was off.
    cast = model.to(torch.bfloat16).to(torch.float32).eval()(tokens[None]).logits[0].float()


def compare(name, x):
    rel = (torch.linalg.norm(x - logits) / torch.linalg.norm(logits)).item()
    top1 = (x.argmax(-1) == logits.argmax(-1)).float().mean().item()
    print(f"hf_reference: {name} vs transformers fp32 (from_pretrained): rel. L2 {rel:.4f}, top-1 agreement {top1:.4f}")


compare("transformers bf16 forward", bf16)
compare("bf16-cast-back fp32 model (buffers cast too)", cast)
logits.numpy().tofile(f"{out}/logits.f32")
json.dump({"tokens": tokens.tolist(), "vocab": cfg.vocab_size}, open(f"{out}/tokens.json", "w"))
print(f"hf_reference: {arch} -> {out} ({n} tokens)")
