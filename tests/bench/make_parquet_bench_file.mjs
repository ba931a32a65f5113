// Writes a larger Parquet file for `grpo bench parquet` (not committed; e.g. into build/):
// GSM8K-like rows (question, answer ending "#### N") or chat rows (messages:
// list<struct<role, content>>, answer), written by parquet-wasm (Apache Arrow's Rust writer) the
// way pyarrow writes Hub datasets: SNAPPY, data page v1, dictionary on, 10,000-row row groups.
// usage: node make_parquet_bench_file.mjs OUT.parquet [rows=100000] [gsm8k|chat]
import { writeFileSync } from "node:fs";
import * as arrow from "apache-arrow";
import * as pw from "parquet-wasm/node";

const [out, rowsArg, kind = "gsm8k"] = process.argv.slice(2);
if (!out) { console.error("usage: node make_parquet_bench_file.mjs OUT.parquet [rows=100000] [gsm8k|chat]"); process.exit(2); }
const n = Number(rowsArg || 100000);

// Deterministic pseudo-random words (64-bit LCG, as the tokenizer benchmark's text).
let s = 0x9E3779B97F4A7C15n;
const next = () => Number((s = (s * 6364136223846793005n + 1442695040888963407n) & 0xFFFFFFFFFFFFFFFFn) >> 33n);
const words = ["apples", "boxes", "students", "dollars", "minutes", "pages", "friends", "cookies", "tickets",
  "bought", "sold", "gave", "each", "more", "than", "twice", "half", "total", "remaining", "week", "day",
  "Natalia", "Weng", "Betty", "James", "Mark", "Julie", "how", "many", "much", "does", "did", "she", "he"];
const sentence = (k) => Array.from({ length: k }, () => words[next() % words.length]).join(" ");

const question = [], answer = [], messages = [];
for (let i = 0; i < n; ++i) {
  const a = 2 + (next() % 500), b = 2 + (next() % 60);
  const q = `${sentence(12 + next() % 20)} ${a} ${sentence(6 + next() % 10)} ${b}? ${sentence(5 + next() % 8)}?`;
  const ans = `${sentence(10 + next() % 15)} <<${a}*${b}=${a * b}>>${a * b}. ${sentence(8 + next() % 12)}\n#### ${a * b}`;
  question.push(q);
  answer.push(ans);
  if (kind === "chat") messages.push([{ role: "system", content: "Solve the problem. Put the answer after ####." }, { role: "user", content: q }]);
}
const str = new arrow.Utf8();
const columns = kind === "chat"
  ? { messages: arrow.vectorFromArray(messages, new arrow.List(new arrow.Field("element", new arrow.Struct([
      new arrow.Field("role", str, true), new arrow.Field("content", str, true)]), true))),
      answer: arrow.vectorFromArray(answer, str) }
  : { question: arrow.vectorFromArray(question, str), answer: arrow.vectorFromArray(answer, str) };
const table = new arrow.Table(columns);
const props = new pw.WriterPropertiesBuilder().setCompression(pw.Compression.SNAPPY).setMaxRowGroupSize(10000).build();
const bytes = pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(table, "stream")), props);
writeFileSync(out, bytes);
console.log(`${out}: ${n} ${kind} rows, ${bytes.length} bytes`);
