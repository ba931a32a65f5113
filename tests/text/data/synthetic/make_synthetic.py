#!/usr/bin/env python3
"""Writes the small synthetic tokenizer.json files the core/text tests use (standard library
only). Their reference ids come from Hugging Face tokenizers' Rust core, not from us:
    node tests/bench/reference_ids.mjs <name>.json texts.txt > <name>.reference.jsonl
(npm `tokenizers` 0.23.2, see tests/bench/package.json). Run from this folder."""
import json
from collections import Counter

CORPUS = """the quick brown fox jumps over the lazy dog
hello world hello there the other thing
tokenizers split words into pieces and merge the pieces back together
numbers like 12345 and 2024 and 3.14 are common in code
def main(): return 0 if x else 1
""" * 3


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def train(words, n_merges, merge_fn):
    """Tiny BPE trainer: words are symbol lists; returns merges [(a, b)] and new symbols."""
    words = [list(w) for w in words]
    merges, new = [], []
    for _ in range(n_merges):
        pairs = Counter()
        for w in words:
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += 1
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        m = merge_fn(a, b)
        merges.append((a, b))
        new.append(m)
        for w in words:
            i = 0
            while i < len(w) - 1:
                if w[i] == a and w[i + 1] == b:
                    w[i:i + 2] = [m]
                else:
                    i += 1
    return merges, new


def vocab_from(symbols):
    vocab = {}
    for s in symbols:
        if s not in vocab:
            vocab[s] = len(vocab)
    return vocab


def added(id_, content, special, lstrip=False, rstrip=False, single_word=False, normalized=None):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": (not special) if normalized is None else normalized,
            "special": special}


def byte_level():
    """GPT-2 style byte-level BPE; ignore_merges false; pair-form merges; Digits + ByteLevel;
    NFKC + regex Replace normalizers; added tokens with lstrip/rstrip/single_word."""
    b2u = bytes_to_unicode()
    words = ["".join(b2u[b] for b in (" " + w).encode()) for w in CORPUS.split()]
    merges, new = train(words, 120, lambda a, b: a + b)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab = vocab_from(specials + [b2u[b] for b in range(256)] + new)
    n = len(vocab)
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(0, "<|endoftext|>", True), added(1, "<|im_start|>", True),
                         added(2, "<|im_end|>", True, rstrip=True),
                         added(n, "<tool>", False, lstrip=True, rstrip=True),
                         added(n + 1, "[MASK]", False, single_word=True),
                         added(n + 2, "wörld", False, normalized=True)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFKC"},
            {"type": "Replace", "pattern": {"Regex": "\\t+"}, "content": "    "}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {
                               "<|im_start|>": {"id": "<|im_start|>", "ids": [1], "tokens": ["<|im_start|>"]},
                               "<|endoftext|>": {"id": "<|endoftext|>", "ids": [0], "tokens": ["<|endoftext|>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }


def metaspace_first():
    """SentencePiece style: Metaspace prepend_scheme "first" with split, byte_fallback,
    fuse_unk, string-form merges, Prepend-free; a normalized added token with rstrip."""
    words = ["▁" + w for w in CORPUS.split()]
    merges, new = train(words, 150, lambda a, b: a + b)
    chars = sorted(set("".join(words)))
    vocab = vocab_from(["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + chars + new)
    n = len(vocab)
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(0, "<unk>", True), added(1, "<s>", True), added(2, "</s>", True),
                         added(n, "<sep>", False, rstrip=True, normalized=True)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {
                               "<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]},
                               "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "ByteFallback"},
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "ignore_merges": False, "vocab": vocab, "merges": ["%s %s" % (a, b) for a, b in merges]},
    }


def split_behaviours():
    """Every Split behaviour, invert, Punctuation; Lowercase/NFD/Strip/Prepend normalizers;
    continuing_subword_prefix + end_of_word_suffix with unk (not fused); BPEDecoder."""
    def symbols(w):
        s = [w[0]] + ["##" + c for c in w[1:]]
        s[-1] += "</w>"
        return s
    words = [symbols(w) for w in CORPUS.lower().split()]
    merges, new = train(words, 150, lambda a, b: a + (b[2:] if b.startswith("##") else b))
    chars = sorted(set("abcdefghijklmnopqrstuvwxyz0123456789.,;:-|()!?'\"=_+*/#@^"))
    base = []
    for c in chars:
        base += [c, "##" + c, c + "</w>", "##" + c + "</w>"]
    vocab = vocab_from(["[UNK]", "[CLS]", "[SEP]"] + base + new)
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(0, "[UNK]", True), added(1, "[CLS]", True), added(2, "[SEP]", True)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFD"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": True, "strip_right": True},
            {"type": "Replace", "pattern": {"String": "``"}, "content": "\""}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\S+"}, "behavior": "Removed", "invert": True},
            {"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithNext", "invert": False},
            {"type": "Split", "pattern": {"Regex": "[,;]"}, "behavior": "Removed", "invert": False},
            {"type": "Split", "pattern": {"Regex": "\\d"}, "behavior": "MergedWithPrevious", "invert": False},
            {"type": "Split", "pattern": {"String": "|"}, "behavior": "Contiguous", "invert": False},
            {"type": "Punctuation", "behavior": "Isolated"}, {"type": "Whitespace"}]},
        "post_processor": {"type": "RobertaProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1],
                           "trim_offsets": True, "add_prefix_space": False},
        "decoder": {"type": "BPEDecoder", "suffix": "</w>"},
        "model": {"type": "BPE", "dropout": None, "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "end_of_word_suffix": "</w>", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }


def whitespace_prepend():
    """Whitespace and WhitespaceSplit-like pre-tokenizers over a Prepend normalizer; Strip and
    Replace decoders; ignore_merges true."""
    t = metaspace_first()
    t["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"},
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": False},
        {"type": "Digits", "individual_digits": False}]}
    t["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
        {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    t["model"]["ignore_merges"] = True
    t["model"]["fuse_unk"] = False
    return t


for name, fn in [("byte_level", byte_level), ("metaspace_first", metaspace_first),
                 ("split_behaviours", split_behaviours), ("whitespace_prepend", whitespace_prepend)]:
    with open(name + ".json", "w", encoding="utf-8") as f:
        json.dump(fn(), f, ensure_ascii=False, indent=1)
