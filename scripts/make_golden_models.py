#!/usr/bin/env python3
"""Make tiny random Hugging Face checkpoints and their reference logits, computed by transformers' own modeling code.

Usage:
    python3 scripts/make_golden_models.py OUT_DIR [NAME...]        # make the named models (default: all)
    python3 scripts/make_golden_models.py --check MODEL_DIR          # rerun an existing folder, compare its logits

It imports transformers normally, so with real transformers installed it runs unchanged. On the project's machines
(no PyPI) it ran with PYTHONPATH=/tmp/hfref: a package whose modeling files are the real transformers source
(see tests/data/golden/MODELS_FROM_SOURCE.md). This script contains no transformers source code.
"""
import json
import os
import struct
import sys

import torch

INPUT_IDS = [3, 1, 4, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26, 43]
COMMON = dict(vocab_size=300, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
              bos_token_id=1, eos_token_id=2, max_position_embeddings=256)


# ---------------------------------------------------------------- safetensors by hand
_DT = {"F32": (torch.float32, 4), "BF16": (torch.bfloat16, 2), "F16": (torch.float16, 2)}


def write_safetensors(path, tensors, dtype="F32"):
    tdt, size = _DT[dtype]
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(tdt).contiguous().cpu()
        raw = (t.view(torch.int16) if size == 2 else t).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header = {"__metadata__": {"format": "pt"}, **header}
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        tdt, size = _DT[info["dtype"]]
        a, b = info["data_offsets"]
        buf = bytearray(data[base + a:base + b])
        if size == 2:
            t = torch.frombuffer(buf, dtype=torch.int16).view(tdt)
        else:
            t = torch.frombuffer(buf, dtype=tdt)
        out[name] = t.reshape(info["shape"]).clone().float()
    return out


# ---------------------------------------------------------------- model specs
def _llama(**kw):
    from transformers.models.llama.configuration_llama import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaForCausalLM
    cfg = dict(COMMON, head_dim=16, num_hidden_layers=2, rms_norm_eps=1e-5, tie_word_embeddings=False,
               rope_theta=10000.0, hidden_act="silu")
    cfg.update(kw)
    return LlamaConfig, LlamaForCausalLM, cfg


def _mistral(**kw):
    from transformers.models.mistral.configuration_mistral import MistralConfig
    from transformers.models.mistral.modeling_mistral import MistralForCausalLM
    cfg = dict(COMMON, head_dim=16, num_hidden_layers=2, rms_norm_eps=1e-6, tie_word_embeddings=False,
               rope_theta=1000000.0, hidden_act="silu", sliding_window=6)
    cfg.update(kw)
    return MistralConfig, MistralForCausalLM, cfg


def _gemma(**kw):
    from transformers.models.gemma.configuration_gemma import GemmaConfig
    from transformers.models.gemma.modeling_gemma import GemmaForCausalLM
    # heads*head_dim = 128 != hidden 64; both activation keys set so the result does not depend on which one a
    # given transformers version reads (<= 4.47 GemmaMLP reads hidden_activation, later ones hidden_act).
    cfg = dict(COMMON, head_dim=32, num_hidden_layers=2, rms_norm_eps=1e-6, tie_word_embeddings=True,
               rope_theta=10000.0, hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh")
    cfg.update(kw)
    return GemmaConfig, GemmaForCausalLM, cfg


def _gemma2(**kw):
    from transformers.models.gemma2.configuration_gemma2 import Gemma2Config
    from transformers.models.gemma2.modeling_gemma2 import Gemma2ForCausalLM
    # Gemma's own special ids (bos 2, eos 1, pad 0 = Gemma2Config defaults) instead of COMMON's bos 1 / eos 2.
    cfg = dict(COMMON, bos_token_id=2, eos_token_id=1, pad_token_id=0,
               num_hidden_layers=4, head_dim=32, rms_norm_eps=1e-6, tie_word_embeddings=True,
               rope_theta=10000.0, hidden_activation="gelu_pytorch_tanh",
               sliding_window=6, query_pre_attn_scalar=24,
               attn_logit_softcapping=2.0, final_logit_softcapping=10.0)
    cfg.update(kw)
    return Gemma2Config, Gemma2ForCausalLM, cfg


def _gemma3(**kw):
    from transformers.models.gemma3.configuration_gemma3 import Gemma3TextConfig
    from transformers.models.gemma3.modeling_gemma3 import Gemma3ForCausalLM
    cfg = dict(COMMON, num_hidden_layers=4, head_dim=32, rms_norm_eps=1e-6, tie_word_embeddings=True,
               sliding_window=6,
               layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
               sliding_window_pattern=2,  # stored as `_sliding_window_pattern`; layer_types takes precedence
               query_pre_attn_scalar=24, rope_theta=1e6, rope_local_base_freq=1e4,
               rope_scaling={"rope_type": "linear", "factor": 8.0},
               final_logit_softcapping=10.0, attn_logit_softcapping=None,
               hidden_activation="gelu_pytorch_tanh")
    cfg.update(kw)
    return Gemma3TextConfig, Gemma3ForCausalLM, cfg


PHI3_SHORT = [1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2, 2.4]
PHI3_LONG = [1.5, 1.8, 2.1, 2.5, 2.8, 3.2, 3.6, 4.0]


def _phi3(**kw):
    from transformers.models.phi3.configuration_phi3 import Phi3Config
    from transformers.models.phi3.modeling_phi3 import Phi3ForCausalLM
    # head_dim is not a Phi3Config argument in v4.48: it is hidden_size // num_attention_heads = 16.
    # pad_token_id: the class default 32000 is outside the 300-token vocab (nn.Embedding padding_idx), so 0.
    cfg = dict(COMMON, num_hidden_layers=2, rms_norm_eps=1e-5, tie_word_embeddings=False, rope_theta=10000.0,
               hidden_act="silu", sliding_window=None, pad_token_id=0, original_max_position_embeddings=256,
               rope_scaling=None)
    cfg.update(kw)
    return Phi3Config, Phi3ForCausalLM, cfg


SPECS = {
    # name: (builder, kwargs, feature-off kwargs or None, extra short-reference length or None[, seed])
    "llama-rope-linear-f32": (_llama, dict(rope_scaling={"rope_type": "linear", "factor": 4.0}),
                              dict(rope_scaling=None), None),
    "llama-rope-dynamic-f32": (_llama, dict(max_position_embeddings=8,
                                            rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
                               dict(rope_scaling=None), 6),
    # No original_max_position_embeddings in rope_scaling: transformers <= 4.48 ignores that key, 4.49-4.57
    # replace factor by max_position_embeddings / it, v5 reads both as given. Without it all agree.
    "llama-rope-yarn-f32": (_llama, dict(rope_scaling={"rope_type": "yarn", "factor": 4.0}),
                            dict(rope_scaling=None), None),
    # Seeds are explicit from here on. Each was made with the transformers files listed in
    # tests/data/golden/MODELS_FROM_SOURCE.md.
    "gemma2-f32": (_gemma2, dict(), dict(attn_logit_softcapping=None, final_logit_softcapping=None), None, 2001),
    "phi3-f32": (_phi3, dict(), None, None, 3001),
    # v4.48's Phi3Config wants exactly {"type", "short_factor", "long_factor"} ("rope_type" is rejected)
    "phi3-longrope-f32": (_phi3, dict(max_position_embeddings=64, original_max_position_embeddings=8,
                                      rope_scaling={"type": "longrope", "short_factor": PHI3_SHORT,
                                                    "long_factor": PHI3_LONG}),
                          dict(rope_scaling=None), 6, 3002),
    # 14 ids > sliding_window 6, so the window is active from position 6 on; off = full causal
    "mistral-sw-f32": (_mistral, dict(), dict(sliding_window=None), None, 4001),
    "gemma-f32": (_gemma, dict(), None, None, 4002),
    "gemma3-text-f32": (_gemma3, {}, dict(rope_scaling=None), None, 5001),
}


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() >= 2:
                std = 0.5 if "embed" in name else 0.25
                p.copy_(torch.randn(p.shape, generator=g) * std)
            elif "norm" in name:
                neutral = 0.0 if _zero_centred_norm(model) else 1.0
                p.copy_(neutral + 0.1 * torch.randn(p.shape, generator=g))
            else:  # biases
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


def _zero_centred_norm(model):
    return model.config.model_type in ("gemma", "gemma2", "gemma3_text")


def build(cfg_cls, model_cls, kw):
    cfg = cfg_cls(**kw)
    cfg.architectures = [model_cls.__name__]
    cfg.torch_dtype = "float32"
    cfg._attn_implementation = "eager"
    model = model_cls(cfg).float().eval()
    return cfg, model


def logits_of(model, ids):
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), use_cache=False, return_dict=False)
    return out[0][0].float()


def state_dict_for_save(model):
    sd = {k: v for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        sd.pop("lm_head.weight", None)
    return sd


def write_logits(path, ids, logits):
    with open(path, "w") as f:
        json.dump({"input_ids": ids, "shape": list(logits.shape), "logits": logits.tolist()}, f)


def make(name, out_root, seed):
    builder, kw, off_kw, short_len = SPECS[name][:4]
    if len(SPECS[name]) > 4:
        seed = SPECS[name][4]
    cfg_cls, model_cls, cfg_kw = builder(**kw)
    cfg, model = build(cfg_cls, model_cls, cfg_kw)
    randomize(model, seed)
    out = os.path.join(out_root, name)
    os.makedirs(out, exist_ok=True)
    cfg.save_pretrained(out)
    write_safetensors(os.path.join(out, "model.safetensors"), state_dict_for_save(model))
    logits = logits_of(model, INPUT_IDS)
    write_logits(os.path.join(out, "reference_logits.json"), INPUT_IDS, logits)
    msg = f"{name}: logits min {logits.min().item():.3f} max {logits.max().item():.3f}"
    if short_len:
        # a fresh model for the short input, so no state (e.g. dynamic rope's cached inv_freq) carries over
        _, m2 = build(cfg_cls, model_cls, builder(**kw)[2])
        m2.load_state_dict(model.state_dict())
        short = logits_of(m2.eval(), INPUT_IDS[:short_len])
        write_logits(os.path.join(out, "reference_logits_short.json"), INPUT_IDS[:short_len], short)
        msg += f"; short ({short_len} ids) vs first {short_len} rows of long: max|diff| " \
               f"{(short - logits[:short_len]).abs().max().item():.4g}"
    if off_kw is not None:
        _, _, cfg_off_kw = builder(**{**kw, **off_kw})
        _, m_off = build(cfg_cls, model_cls, cfg_off_kw)
        m_off.load_state_dict(model.state_dict())
        diff = (logits_of(m_off, INPUT_IDS) - logits).abs().max().item()
        msg += f"; feature off {off_kw}: max|diff| {diff:.4g}"
    print(msg)


def check(model_dir):
    """Rerun an existing golden folder (config.json + model.safetensors) and compare with its reference logits."""
    cfg_json = json.load(open(os.path.join(model_dir, "config.json")))
    mt = {"gemma3_text": "gemma3"}.get(cfg_json["model_type"], cfg_json["model_type"])  # transformers' module
    mod = __import__(f"transformers.models.{mt}.modeling_{mt}", fromlist=["x"])
    cmod = __import__(f"transformers.models.{mt}.configuration_{mt}", fromlist=["x"])
    model_cls = getattr(mod, cfg_json["architectures"][0])
    cfg_cls = model_cls.config_class
    kw = {k: v for k, v in cfg_json.items() if k not in ("architectures", "model_type", "transformers_version",
                                                            "_name_or_path", "torch_dtype")}
    cfg, model = build(cfg_cls, model_cls, kw)
    sd = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and all(k == "lm_head.weight" for k in missing), (missing, unexpected)
    if cfg.tie_word_embeddings:
        model.lm_head.weight = model.get_input_embeddings().weight
    ref = json.load(open(os.path.join(model_dir, "reference_logits.json")))
    got = logits_of(model, ref["input_ids"])
    diff = (got - torch.tensor(ref["logits"])).abs().max().item()
    print(f"{model_dir}: max|diff| vs reference_logits.json = {diff:.3g} (logits range {got.min():.2f}..{got.max():.2f})")
    return diff


def main(argv):
    if len(argv) >= 2 and argv[0] == "--check":
        worst = max(check(d) for d in argv[1:])
        sys.exit(0 if worst < 1e-4 else 1)
    if not argv:
        print(__doc__)
        sys.exit(2)
    out_root, names = argv[0], argv[1:] or list(SPECS)
    torch.set_num_threads(1)
    for i, name in enumerate(SPECS):
        if name in names:
            make(name, out_root, seed=1000 + i)


if __name__ == "__main__":
    main(sys.argv[1:])
