#!/usr/bin/env python3
"""Writes the demo model's tokenizer (Python stdlib only, deterministic).

A byte-level BPE tokenizer in the exact Hugging Face layout of Qwen2's: the Qwen2 Split regex
(single digits, so numbers are digit sequences) followed by the ByteLevel pre-tokenizer and
decoder, the 256 byte tokens in GPT-2's bytes_to_unicode order, merges learned from generated
arithmetic prompts/answers, the chat template text and a short English paragraph, and the
specials <|endoftext|>, <|im_start|>, <|im_end|>. Writes tokenizer.json, tokenizer_config.json
(ChatML chat template) and generation_config.json into OUT_DIR.

usage: make_demo_tokenizer.py OUT_DIR [--merges N]
"""
import argparse
import collections
import json
import os
import random
import re

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}"
)
# Qwen2's pre-tokenizer regex (what tokenizer.json carries) and its ASCII transcription for
# Python's re, exact on the ASCII training text below.
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
ASCII_REGEX = re.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]| ?[^\sA-Za-z0-9]+[\r\n]*"
                         r"|\s*[\r\n]+|\s+(?!\S)|\s+")

ENGLISH = """You are a helpful assistant. Answer the question with a single number.
What is the sum of two numbers? The difference of two numbers is what you get when you
subtract the second from the first. Compute the result, then write the answer.
Calculate the value of the expression and give only the final answer.
Solve the following problem step by step, and put the answer in the box.
The answer is the number that makes the equation true. Numbers can be negative or positive.
Add, subtract and multiply the numbers from left to right, with multiplication first.
Question: what is it? Answer: it is a number. Think about it, then reply.
This is a small model for arithmetic, trained with supervised fine-tuning and then with
reinforcement learning from rewards for correct answers.
"""


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map, in its id order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [(b, chr(c)) for b, c in zip(bs, cs)]


def corpus_texts(seed=1234, count=6000):
    """Arithmetic prompts (in the chat template) and answers, plus the English paragraph."""
    rng = random.Random(seed)
    texts = []
    templates = ["What is {e}?", "Compute {e}.", "Calculate {e}", "{e} ="]
    for _ in range(count):
        terms = rng.choice([2, 2, 2, 3])
        digits = rng.choice([1, 2, 2, 3])
        vals = [rng.randrange(10 ** digits) for _ in range(terms)]
        ops = [rng.choice("+-*") for _ in range(terms - 1)]
        expr = str(vals[0]) + "".join(f" {o} {v}" for o, v in zip(ops, vals[1:]))
        answer = str(eval(expr))  # digits and + - * only
        prompt = rng.choice(templates).format(e=expr)
        texts.append(f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n{answer}<|im_end|>\n")
    texts.append("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n")
    texts.extend([ENGLISH] * 20)
    return texts


def learn_merges(texts, num_merges, byte_map):
    """Classic BPE training on pre-tokenized words; ties broken by the pair's text."""
    special_re = re.compile("|".join(re.escape(s) for s in SPECIALS))
    words = collections.Counter()
    for t in texts:
        for piece in special_re.split(t):
            for w in ASCII_REGEX.findall(piece):
                words["".join(byte_map[b] for b in w.encode("utf-8"))] += 1
    splits = {w: list(w) for w in words}
    merges = []
    while len(merges) < num_merges:
        pairs = collections.Counter()
        for w, n in words.items():
            s = splits[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best_count = max(pairs.values())
        if best_count < 2:
            break
        best = min(p for p, n in pairs.items() if n == best_count)
        merges.append(best)
        joined = best[0] + best[1]
        for w in words:
            s = splits[w]
            i, out = 0, []
            while i < len(s):
                if i + 1 < len(s) and s[i] == best[0] and s[i + 1] == best[1]:
                    out.append(joined)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            splits[w] = out
    return merges


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--merges", type=int, default=400)
    args = ap.parse_args()

    table = bytes_to_unicode()
    byte_map = {b: c for b, c in table}
    vocab = {c: i for i, (_, c) in enumerate(table)}
    merges = learn_merges(corpus_texts(), args.merges, byte_map)
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    added = []
    for s in SPECIALS:
        added.append({"id": len(vocab) + len(added), "content": s, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
            byte_level]},
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }
    ids = {t["content"]: t["id"] for t in added}
    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                                  "single_word", "special")} for t in added},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 512,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    generation = {
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|endoftext|>"],
        "transformers_version": "4.45.2",
    }
    os.makedirs(args.out_dir, exist_ok=True)
    for name, obj in (("tokenizer.json", tokenizer), ("tokenizer_config.json", config),
                      ("generation_config.json", generation)):
        with open(os.path.join(args.out_dir, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, ensure_ascii=False)
            f.write("\n")
    print(f"tokenizer: {len(vocab)} BPE tokens ({len(merges)} merges) + {len(added)} specials, "
          f"ids {ids} -> {args.out_dir}")


if __name__ == "__main__":
    main()
