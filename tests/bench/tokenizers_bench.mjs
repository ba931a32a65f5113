// The Hugging Face tokenizers Rust core (npm `tokenizers`, pinned in package.json) on a text
// file, for `grpo bench tokenize` (core/text/tokenizer_bench.cpp). Run with
// TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 for single-thread figures.
// usage: node tokenizers_bench.mjs <tokenizer.json> <textfile>
// prints {"load_s", "encode_mb_s", "encode_cold_mb_s", "ids_count", "ids_hash", "lines"}:
// load_s the median of 5 loads; encode over every line (split on "\n"), median of 3 passes;
// ids_hash FNV-1a (32 bit) over each line's ids then 0xFFFFFFFF, as the C++ side computes it.
import { readFileSync } from "node:fs";
import { Tokenizer } from "tokenizers";

const [tokenizerPath, textPath] = process.argv.slice(2);
const now = () => Number(process.hrtime.bigint()) / 1e9;
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

const loads = [];
let tok;
for (let k = 0; k < 5; ++k) {
  const t0 = now();
  tok = Tokenizer.fromFile(tokenizerPath);
  loads.push(now() - t0);
}
const text = readFileSync(textPath, "utf8");
const bytes = Buffer.byteLength(text, "utf8");
const lines = text.split("\n");
if (lines.length && lines[lines.length - 1] === "") lines.pop();

const times = [];
let encodings;
for (let pass = 0; pass < 3; ++pass) {
  const t0 = now();
  encodings = await tok.encodeBatch(lines, { addSpecialTokens: false });
  times.push(now() - t0);
}
let h = 2166136261 >>> 0;
let count = 0;
const add = (v) => { h = Math.imul((h ^ v) >>> 0, 16777619) >>> 0; };
for (const e of encodings) {
  const ids = e.getIds();
  for (const id of ids) add(id >>> 0);
  add(0xFFFFFFFF);
  count += ids.length;
}
console.log(JSON.stringify({ load_s: median(loads), encode_mb_s: bytes / 1e6 / median(times),
                             encode_cold_mb_s: bytes / 1e6 / times[0], ids_count: count,
                             ids_hash: h, lines: lines.length }));
