#!/usr/bin/env python3
# Baseline for `grpo bench grpo-step`: one GRPO optimizer step as TRL's GRPOTrainer runs it with
# PEFT LoRA in PyTorch eager, written out so that it needs nothing but torch (Debian's
# python3-torch): a Qwen2/Llama forward (embeddings, RMSNorm, RoPE, GQA attention with a causal
# + padding mask, "eager" attention as transformers writes it, SwiGLU, tied/untied head), PEFT
# LoRA linears, TRL's padded batch (prompts left-padded, completions right-padded to the batch's
# longest), micro-batches of per_device_train_batch_size, logits_to_keep, full logits / temperature,
# selective_log_softmax, the entropy metric, the loss of the batch's loss_type (TRL's
# _compute_loss, from tests/grpo/loss_reference.py: dapo, cispo and vespo normalised by the
# accumulated batch's completion tokens, the others per micro-batch and divided by the number of
# micro-batches), backward per micro-batch, clip_grad_norm_ and torch.optim.AdamW.
#
# One deliberate difference from TRL: position ids come from the attention mask (cumsum - 1),
# as transformers' generate() makes them, rather than arange(T) over the left padding; this is
# what the sampler's log-probs mean and what our packed rows compute, so both sides do the same
# math.
#
# Usage: grpo_step_baseline.py <dir>   (dir holds batch.json, model/, adapter/ written by the bench)
# Prints one JSON line: losses, grad_norms (per step), step_times, median_step_s, padded_tokens.
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "grpo"))
from loss_reference import compute_loss  # noqa: E402  (TRL's loss, shared with the loss tests)

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        buf = bytearray(data[8 + n + start:8 + n + end])
        t = torch.frombuffer(buf, dtype=DTYPES[info["dtype"]]) if buf else torch.empty(0)
        out[name] = t.reshape(info["shape"]).to(torch.float32)
    return out


class LoraLinear(nn.Module):
    """peft.tuners.lora.Linear: base(x) + lora_B(lora_A(dropout(x))) * scaling."""

    def __init__(self, weight, bias, lora_a=None, lora_b=None, scaling=1.0):
        super().__init__()
        self.base = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
        with torch.no_grad():
            self.base.weight.copy_(weight)
            if bias is not None:
                self.base.bias.copy_(bias)
        self.base.requires_grad_(False)
        self.lora_A = self.lora_B = None
        if lora_a is not None:
            self.lora_A = nn.Linear(lora_a.shape[1], lora_a.shape[0], bias=False)
            self.lora_B = nn.Linear(lora_b.shape[1], lora_b.shape[0], bias=False)
            with torch.no_grad():
                self.lora_A.weight.copy_(lora_a)
                self.lora_B.weight.copy_(lora_b)
            self.scaling = scaling

    def forward(self, x):
        result = self.base(x)
        if self.lora_A is not None:
            result = result + self.lora_B(self.lora_A(x)) * self.scaling
        return result


def rms_norm(x, weight, eps):  # Qwen2RMSNorm
    dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * h.to(dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n_rep):  # (B, KVH, T, D) -> (B, KVH*n_rep, T, D)
    if n_rep == 1:
        return x
    b, kvh, t, d = x.shape
    return x[:, :, None, :, :].expand(b, kvh, n_rep, t, d).reshape(b, kvh * n_rep, t, d)


class Model(nn.Module):
    def __init__(self, cfg, weights, adapter, scaling):
        super().__init__()
        self.cfg = cfg
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads") or self.heads
        self.head_dim = cfg.get("head_dim") or cfg["hidden_size"] // self.heads
        self.eps = cfg["rms_norm_eps"]
        rs = cfg.get("rope_scaling")
        if rs and rs.get("rope_type", rs.get("type", "default")) != "default":
            raise SystemExit("baseline: rope_scaling %r is not implemented" % rs)
        dim = self.head_dim
        self.inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.embed = nn.Parameter(weights["model.embed_tokens.weight"], requires_grad=False)
        self.norm_w = nn.Parameter(weights["model.norm.weight"], requires_grad=False)

        def lin(path):
            key = "base_model.model." + path
            a = adapter.get(key + ".lora_A.weight")
            b = adapter.get(key + ".lora_B.weight")
            return LoraLinear(weights[path + ".weight"], weights.get(path + ".bias"), a, b, scaling)

        self.layers = nn.ModuleList()
        for i in range(cfg["num_hidden_layers"]):
            p = "model.layers.%d." % i
            layer = nn.Module()
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                setattr(layer, name, lin(p + "self_attn." + name))
            for name in ("gate_proj", "up_proj", "down_proj"):
                setattr(layer, name, lin(p + "mlp." + name))
            layer.ln1 = nn.Parameter(weights[p + "input_layernorm.weight"], requires_grad=False)
            layer.ln2 = nn.Parameter(weights[p + "post_attention_layernorm.weight"], requires_grad=False)
            layer.q_norm = weights.get(p + "self_attn.q_norm.weight")
            layer.k_norm = weights.get(p + "self_attn.k_norm.weight")
            self.layers.append(layer)
        self.lm_head = None if "lm_head.weight" not in weights else lin("lm_head")

    def attention(self, layer, x, cos, sin, mask):
        b, t, _ = x.shape
        q = layer.q_proj(x).view(b, t, -1, self.head_dim)
        k = layer.k_proj(x).view(b, t, -1, self.head_dim)
        v = layer.v_proj(x).view(b, t, -1, self.head_dim)
        if layer.q_norm is not None:
            q = rms_norm(q, layer.q_norm, self.eps)
            k = rms_norm(k, layer.k_norm, self.eps)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = repeat_kv(k, self.heads // self.kv_heads)
        v = repeat_kv(v, self.heads // self.kv_heads)
        w = torch.matmul(q, k.transpose(2, 3)) * (self.head_dim ** -0.5)
        w = w + mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).reshape(b, t, -1)
        return layer.o_proj(out)

    def forward(self, input_ids, attention_mask, position_ids, logits_to_keep):
        b, t = input_ids.shape
        h = F.embedding(input_ids, self.embed)
        freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[:, None], emb.sin()[:, None]  # (B, 1, T, D)
        # Causal + key padding, additive with the dtype's minimum (transformers' 4D mask).
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        allowed = causal[None, None] & attention_mask[:, None, None, :].bool()
        mask = torch.zeros(b, 1, t, t).masked_fill(~allowed, torch.finfo(torch.float32).min)
        for layer in self.layers:
            h = h + self.attention(layer, rms_norm(h, layer.ln1, self.eps), cos, sin, mask)
            x = rms_norm(h, layer.ln2, self.eps)
            h = h + layer.down_proj(F.silu(layer.gate_proj(x)) * layer.up_proj(x))
        h = rms_norm(h, self.norm_w, self.eps)
        h = h[:, -logits_to_keep:, :]
        return self.lm_head(h) if self.lm_head is not None else F.linear(h, self.embed)


def selective_log_softmax(logits, index):  # trl.trainer.utils, fp32 branch
    selected = torch.gather(logits, dim=-1, index=index.unsqueeze(-1)).squeeze(-1)
    logsumexp_values = torch.stack([torch.logsumexp(lg, dim=-1) for lg in logits])
    return selected - logsumexp_values


def entropy_from_logits(logits, chunk_size=128):  # trl.trainer.utils
    flat = logits.reshape(-1, logits.shape[-1])
    ents = []
    for chunk in flat.split(chunk_size, dim=0):
        logps = F.log_softmax(chunk, dim=-1)
        ents.append(-(torch.exp(logps) * logps).sum(-1))
    return torch.cat(ents).reshape(logits.shape[:-1])


def main():
    d = sys.argv[1]
    with open(os.path.join(d, "batch.json")) as f:
        batch = json.load(f)
    c = batch["config"]
    torch.set_num_threads(max(1, int(c["threads"])))
    # --device cuda: every tensor of the step on the GPU (factories too), fp32 without TF32 as ours.
    dev = torch.device(c.get("device", "cpu"))

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    with open(os.path.join(batch["model_dir"], "config.json")) as f:
        mcfg = json.load(f)
    weights = {k: v.to(dev) for k, v in load_safetensors(os.path.join(batch["model_dir"], "model.safetensors")).items()}
    adapter = {k: v.to(dev) for k, v in load_safetensors(os.path.join(batch["adapter_dir"], "adapter_model.safetensors")).items()}
    if dev.type != "cpu":  # after reading the files: frombuffer makes CPU tensors
        torch.set_default_device(dev)
        torch.backends.cuda.matmul.allow_tf32 = False
    with open(os.path.join(batch["adapter_dir"], "adapter_config.json")) as f:
        acfg = json.load(f)
    r, alpha = acfg["r"], acfg["lora_alpha"]
    assert r == c["r"] and alpha == c["lora_alpha"], "adapter and batch disagree on r / lora_alpha"
    scaling = alpha / math.sqrt(r) if acfg.get("use_rslora") else alpha / r
    model = Model(mcfg, weights, adapter, scaling)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=c["learning_rate"], betas=(c["adam_beta1"], c["adam_beta2"]),
                            eps=c["adam_epsilon"], weight_decay=c["weight_decay"])

    # TRL's padded generation batch: prompts left-padded, completions right-padded (pad id 0).
    samples = batch["samples"]
    n = len(samples)
    P = max(len(s["prompt_ids"]) for s in samples)
    C = max(len(s["completion_ids"]) for s in samples)
    prompt_ids = torch.zeros(n, P, dtype=torch.long)
    prompt_mask = torch.zeros(n, P, dtype=torch.long)
    completion_ids = torch.zeros(n, C, dtype=torch.long)
    completion_mask = torch.zeros(n, C, dtype=torch.long)
    old = torch.zeros(n, C)
    for i, s in enumerate(samples):
        p, cc = s["prompt_ids"], s["completion_ids"]
        prompt_ids[i, P - len(p):] = torch.tensor(p)
        prompt_mask[i, P - len(p):] = 1
        completion_ids[i, :len(cc)] = torch.tensor(cc)
        completion_mask[i, :len(cc)] = 1
        old[i, :len(cc)] = torch.tensor(s["old_logprobs"])
    advantages = torch.tensor([s["advantage"] for s in samples], dtype=torch.float32)
    input_ids = torch.cat([prompt_ids, completion_ids], 1)
    attention_mask = torch.cat([prompt_mask, completion_mask], 1)
    position_ids = (attention_mask.cumsum(1) - 1).clamp(min=0)
    num_items_in_batch = completion_mask.sum().item()  # dapo: the accumulated batch's tokens
    mb = c["per_device_train_batch_size"]
    temperature = c["temperature"]
    loss_cfg = dict(c, loss_type=c.get("loss_type", "dapo"), importance_sampling_level=c.get("importance_sampling_level", "token"),
                    beta=0.0)
    accumulation_steps = (n + mb - 1) // mb  # TRL's current_gradient_accumulation_steps

    def step():
        total = 0.0
        for s in range(0, n, mb):
            sl = slice(s, s + mb)
            logits = model(input_ids[sl], attention_mask[sl], position_ids[sl], C + 1)
            logits = logits[:, :-1, :] / temperature  # (b, C, V)
            logps = selective_log_softmax(logits, completion_ids[sl])
            with torch.no_grad():
                entropies = entropy_from_logits(logits)  # the entropy metric TRL logs
            mask = completion_mask[sl].float()
            loss, _ = compute_loss(logps, old[sl], advantages[sl], mask, loss_cfg,
                                   num_items_in_batch=num_items_in_batch,
                                   gradient_accumulation_steps=accumulation_steps, with_metrics=False)
            loss.backward()
            total += loss.item()
            _ = (entropies * mask).sum().item()
        grad_norm = torch.nn.utils.clip_grad_norm_(params, c["max_grad_norm"]).item()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return total, grad_norm

    losses, norms, times = [], [], []
    for i in range(c["steps"]):
        sync()
        t0 = time.perf_counter()
        loss, gn = step()
        sync()
        dt = time.perf_counter() - t0
        losses.append(loss)
        norms.append(gn)
        if i > 0:
            times.append(dt)
    ts = sorted(times)
    print(json.dumps({
        "losses": losses,
        "grad_norms": norms,
        "step_times": times,
        "median_step_s": ts[len(ts) // 2],
        "padded_tokens": n * (P + C),
        "threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "device": str(dev),
    }))


if __name__ == "__main__":
    main()
