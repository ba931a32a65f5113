// Writes tests/data/arith_dataset/: a small dataset repo laid out as the Hub lays out a Parquet
// dataset (README.md with `configs:`, data/<split>-00000-of-00001.parquet), in TRL's conversational
// form (prompt: [{role, content}], solution). Its prompts are the demo model's task (one-digit
// addition and subtraction, "What is a + b?"), so `grpo train` with dataset_name can learn on the
// embedded demo model. Written by parquet-wasm (arrow-rs), as make_reference_files.mjs is.
//   cd tests/data/parquet/gen && npm ci && node make_arith_dataset.mjs
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as arrow from 'apache-arrow'
import * as pw from 'parquet-wasm/node'

const here = dirname(fileURLToPath(import.meta.url))
const out = join(here, '..', '..', 'arith_dataset')
const version = name => JSON.parse(readFileSync(join(here, 'node_modules', name, 'package.json'))).version

// Every one-digit a + b and a - b (200 problems), in a fixed shuffled order (LCG).
const all = []
for (let a = 0; a < 10; a++)
  for (let b = 0; b < 10; b++)
    for (const op of ['+', '-']) all.push({ a, b, op })
let s = 12345
const rand = () => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648
for (let i = all.length - 1; i > 0; i--) {
  const j = Math.floor(rand() * (i + 1));
  [all[i], all[j]] = [all[j], all[i]]
}
const rows = all.map(({ a, b, op }) => ({
  prompt: [{ role: 'user', content: `What is ${a} ${op} ${b}?` }],
  solution: String(op === '+' ? a + b : a - b),
}))

const str = () => new arrow.Utf8()
const message = new arrow.Struct([new arrow.Field('role', str(), true), new arrow.Field('content', str(), true)])
const promptType = new arrow.List(new arrow.Field('element', message, true))
function write(file, part) {
  const fields = [new arrow.Field('prompt', promptType, true), new arrow.Field('solution', str(), true)]
  const table = new arrow.Table(new arrow.Schema(fields), {
    prompt: arrow.vectorFromArray(part.map(r => r.prompt), promptType),
    solution: arrow.vectorFromArray(part.map(r => r.solution), str()),
  })
  const wasm = pw.Table.fromIPCStream(arrow.tableToIPC(table, 'stream'))
  const props = new pw.WriterPropertiesBuilder().setCreatedBy(`parquet-wasm ${version('parquet-wasm')}`)
    .setCompression(pw.Compression.SNAPPY).setMaxRowGroupSize(64).build()
  mkdirSync(dirname(join(out, file)), { recursive: true })
  writeFileSync(join(out, file), pw.writeParquet(wasm, props))
}
write('data/train-00000-of-00001.parquet', rows)
write('data/test-00000-of-00001.parquet', rows.slice(0, 50))
writeFileSync(join(out, 'README.md'), `---
license: mit
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*
  - split: test
    path: data/test-*
---
# grpo-test/arith

Every one-digit addition and subtraction, as TRL conversational prompts with a \`solution\`
column: the task of GRPO Studio's embedded demo model. Written by
\`tests/data/parquet/gen/make_arith_dataset.mjs\` with parquet-wasm ${version('parquet-wasm')}.
`)
console.log(`wrote ${rows.length} train and 50 test rows to ${out}`)
