// hyparquet (npm, pinned in package.json; hyparquet-compressors for GZIP/ZSTD/... and its wasm
// snappy) reading a Parquet file into row objects, for `grpo bench parquet`
// (core/io/parquet_bench.cpp): the reference figure, run on the same file in the same run.
// usage: node parquet_bench.mjs <file.parquet> [passes=5]
// prints one flat JSON object {"rows", "seconds", "rows_per_s", "mb_per_s", "strings_hash", ...}:
// seconds is the median over passes of reading the file from disk and decoding every row
// (parquetReadObjects); strings_hash is FNV-1a (32 bit) over the UTF-8 bytes of every string value,
// depth first in row and key order, each followed by 0xFF, as the C++ side computes it.
import { statSync } from "node:fs";
import { asyncBufferFromFile, parquetReadObjects } from "hyparquet";
import { compressors } from "hyparquet-compressors";

const [file, passesArg] = process.argv.slice(2);
const passes = Math.max(1, Number(passesArg || 5));
const now = () => Number(process.hrtime.bigint()) / 1e9;
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

const times = [];
let rows;
for (let pass = 0; pass < passes; ++pass) {
  const t0 = now();
  const buffer = await asyncBufferFromFile(file);
  rows = await parquetReadObjects({ file: buffer, compressors });
  times.push(now() - t0);
}

let h = 2166136261 >>> 0;
const encoder = new TextEncoder();
const add = (b) => { h = Math.imul((h ^ b) >>> 0, 16777619) >>> 0; };
const walk = (v) => {
  if (typeof v === "string") { for (const b of encoder.encode(v)) add(b); add(0xff); }
  else if (Array.isArray(v)) v.forEach(walk);
  else if (v && typeof v === "object" && !(v instanceof Uint8Array)) Object.values(v).forEach(walk);
};
rows.forEach(walk);

const seconds = median(times);
const bytes = statSync(file).size;
console.log(JSON.stringify({
  rows: rows.length, seconds, cold_seconds: times[0], rows_per_s: rows.length / seconds,
  mb_per_s: bytes / 1e6 / seconds, strings_hash: h,
}));
