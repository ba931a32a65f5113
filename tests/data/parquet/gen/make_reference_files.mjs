// Writes the Parquet reference files of tests/data/parquet/ with writers nobody here wrote, and
// next to each one its expected rows (<name>.jsonl) as read back by hyparquet, a reader nobody
// here wrote either. tests/io/test_parquet.cpp reads the committed files; it needs no node.
//   cd tests/data/parquet/gen && npm ci && node make_reference_files.mjs
// Writers: parquet-wasm (Apache Arrow's Rust `parquet` crate compiled to WebAssembly; tables
// built with apache-arrow) and hyparquet-writer. Versions are pinned in package.json.
import { readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as arrow from 'apache-arrow'
import * as pw from 'parquet-wasm/node'
import { parquetReadObjects } from 'hyparquet'
import { compressors } from 'hyparquet-compressors'
import { parquetWriteBuffer } from 'hyparquet-writer'

const here = dirname(fileURLToPath(import.meta.url))
const outDir = join(here, '..')
const version = name => JSON.parse(readFileSync(join(here, 'node_modules', name, 'package.json'))).version
const written = []  // [file, writer, description] for the README table

// ---- source data (deterministic) --------------------------------------------------------------

const words = ['alpha', 'beta', '', 'naïve café', '日本語のテキスト', 'emoji 🚀✨', 'tab\tand "quotes"',
  'line\nbreak', 'the quick brown fox jumps over the lazy dog', 'beta']
const roles = ['system', 'user', 'assistant']

function typesRows(n) {
  const rows = []
  for (let i = 0; i < n; i++) {
    let messages = null
    if (i % 9 !== 4) {
      messages = []
      const k = i % 9 === 8 ? 0 : 1 + (i % 4)
      for (let j = 0; j < k; j++) {
        const content = (i + j) % 11 === 10 ? null : `${roles[(i + j) % 3]} says ${words[(i * 3 + j) % words.length]} #${i}.${j}`
        messages.push(i % 13 === 12 && j === 0 ? null : { role: j === 0 ? 'system' : roles[1 + (j % 2)], content })
      }
    }
    rows.push({
      id: BigInt(i) * 4294967311n - 123456789n,
      n32: i % 7 === 3 ? null : i === 5 ? -2147483648 : i === 6 ? 2147483647 : i * 37 - 900,
      f32: i % 5 === 2 ? null : Math.fround(i * 0.25 - 3.3),
      f64: i === 7 ? 1e300 : i === 8 ? -0.0001234 : i * 1.5e-3 - 2.75,
      flag: i % 4 === 1 ? null : i % 3 === 0,
      s: i % 6 === 5 ? null : words[i % words.length] + (i % 3 === 0 ? '' : ` ${i % 5}`),
      messages,
    })
  }
  return rows
}

const gsmQuestions = [
  'Natalia sold clips to {a} of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?',
  'Weng earns ${a} an hour for babysitting. Yesterday, she just did {b} minutes of babysitting. How much did she earn?',
  'Betty is saving money for a new wallet which costs ${a}. She has only half of the money she needs. How much more money does Betty need?',
  'James writes a {b}-page letter to {a} different friends twice a week. How many pages does he write a year?',
]
function gsmRows(n) {
  const rows = []
  for (let i = 0; i < n; i++) {
    const a = 12 + ((i * 7) % 90), b = 2 + (i % 9)
    const q = gsmQuestions[i % gsmQuestions.length].replace('{a}', a).replace('{b}', b)
    const ans = [a * 2 + b, a + b, a * b, a * b * 52][i % 4]
    rows.push({ question: q, answer: `Step one: ${a} and ${b} give <<${a}*${b}=${a * b}>>${a * b}.\nSo the total is ${ans}.\n#### ${ans}` })
  }
  return rows
}

function chatRows(n) {
  const rows = []
  for (let i = 0; i < n; i++) {
    const prompt = [{ role: 'user', content: `What is ${i} + ${i * 3}? Think step by step.` }]
    if (i % 3 === 0) prompt.unshift({ role: 'system', content: 'You are a careful math tutor. Put the final answer in \\boxed{}.' })
    rows.push({ prompt, solution: `\\boxed{${i * 4}}`, level: BigInt(i % 5) })
  }
  return rows
}

// ---- writers ----------------------------------------------------------------------------------

const str = () => new arrow.Utf8()
const structOf = (fields, nullable) => new arrow.Struct(fields.map(([n, t]) => new arrow.Field(n, t, nullable)))
const listOf = (name, t, nullable = true) => new arrow.List(new arrow.Field(name, t, nullable))
const messageList = (element, nullable) => listOf(element, structOf([['role', str()], ['content', str()]], nullable), nullable)

function arrowTable(rows, columns) {
  const fields = [], data = {}
  for (const [name, type, nullable] of columns) {
    fields.push(new arrow.Field(name, type, nullable))
    data[name] = arrow.vectorFromArray(rows.map(r => r[name]), type)
  }
  return new arrow.Table(new arrow.Schema(fields), data)
}

// parquet-wasm: props is a function (WriterPropertiesBuilder) -> WriterPropertiesBuilder.
function writeArrowRs(file, table, props, description) {
  const wasmTable = pw.Table.fromIPCStream(arrow.tableToIPC(table, 'stream'))
  let b = new pw.WriterPropertiesBuilder().setCreatedBy(`parquet-wasm ${version('parquet-wasm')}`)
  b = props(b)
  const bytes = pw.writeParquet(wasmTable, b.build())
  writeFileSync(join(outDir, file), bytes)
  written.push([file, `parquet-wasm ${version('parquet-wasm')} (arrow-rs parquet)`, description])
}

function writeHyparquet(file, options, description) {
  const buf = parquetWriteBuffer({ ...options, createdBy: `hyparquet-writer ${version('hyparquet-writer')}` })
  writeFileSync(join(outDir, file), new Uint8Array(buf))
  written.push([file, `hyparquet-writer ${version('hyparquet-writer')}`, description])
}

// ---- expected rows: what hyparquet reads --------------------------------------------------------

// JSON with BigInts as plain integers (exact, even beyond 2^53) and bytes as UTF-8 text.
function toJson(value) {
  const marked = JSON.stringify(value, (k, v) => {
    if (typeof v === 'bigint') return `__bigint__${v}`
    if (v instanceof Uint8Array) {  // binary: our reader's documented mapping (parquet.h)
      try { return new TextDecoder('utf-8', { fatal: true }).decode(v) } catch { return Buffer.from(v).toString('base64') }
    }
    return v
  })
  return marked.replace(/"__bigint__(-?\d+)"/g, '$1')
}

// Files written from the same rows share one expected file, checked identical here; the manifest
// expected.json maps every .parquet to its .jsonl.
const manifest = {}
async function writeExpected(file, expectedName) {
  const bytes = readFileSync(join(outDir, file))
  const ab = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)
  // utf8: false keeps unannotated BYTE_ARRAY as bytes (STRING columns are still decoded, with
  // U+FFFD for invalid UTF-8); toJson maps bytes as our reader does.
  const rows = await parquetReadObjects({ file: ab, compressors, utf8: false })
  const jsonl = rows.map(r => toJson(r) + '\n').join('')
  const path = join(outDir, expectedName)
  if (expectedName in sharedExpected) {
    if (sharedExpected[expectedName] !== jsonl) throw new Error(`${file}: rows differ from ${expectedName}`)
  } else {
    sharedExpected[expectedName] = jsonl
    writeFileSync(path, jsonl)
  }
  manifest[file] = expectedName
}
const sharedExpected = {}

// ---- the files ----------------------------------------------------------------------------------

const types = typesRows(40)
const typesColumns = [
  ['id', new arrow.Int64(), true], ['n32', new arrow.Int32(), true], ['f32', new arrow.Float32(), true],
  ['f64', new arrow.Float64(), true], ['flag', new arrow.Bool(), true], ['s', str(), true],
  ['messages', messageList('element', true), true],
]
const typesTable = arrowTable(types, typesColumns)
const codecs = { uncompressed: 'UNCOMPRESSED', snappy: 'SNAPPY', gzip: 'GZIP', zstd: 'ZSTD' }
for (const [codecName, codec] of Object.entries(codecs)) {
  for (const [pageName, writerVersion] of [['v1', pw.WriterVersion.V1], ['v2', pw.WriterVersion.V2]]) {
    for (const dict of [true, false]) {
      const file = `types_${codecName}_${pageName}_${dict ? 'dict' : 'plain'}.parquet`
      writeArrowRs(file, typesTable, b => b.setCompression(pw.Compression[codec]).setWriterVersion(writerVersion)
        .setDictionaryEnabled(dict).setMaxRowGroupSize(12).setDataPageSizeLimit(160).setWriteBatchSize(8)
        .setStatisticsEnabled(pw.EnabledStatistics.None),
      `types × ${codec}, data page ${pageName}, ${dict ? 'dictionary' : 'no dictionary (v2: DELTA_* fallbacks)'}, 4 row groups, several pages per chunk, no statistics`)
    }
  }
}

// Dictionary pages that overflow their limit: the writer falls back to plain pages mid-chunk.
writeArrowRs('dict_fallback.parquet', typesTable, b => b.setCompression(pw.Compression.SNAPPY)
  .setDictionaryPageSizeLimit(64).setDataPageSizeLimit(128).setWriteBatchSize(4).setMaxRowGroupSize(20)
  .setStatisticsEnabled(pw.EnabledStatistics.Page),
'types, SNAPPY, v1, page statistics, tiny dictionary limit: dictionary pages then PLAIN fallback pages in one chunk')

// DELTA_* encodings and BYTE_STREAM_SPLIT chosen per top-level column with the dictionary off
// (parquet-wasm takes no nested column path here; the v2 plain files use DELTA_BYTE_ARRAY for all).
writeArrowRs('delta_encodings.parquet', typesTable, b => b.setCompression(pw.Compression.UNCOMPRESSED)
  .setDictionaryEnabled(false).setMaxRowGroupSize(25).setWriteBatchSize(8).setDataPageSizeLimit(256)
  .setStatisticsEnabled(pw.EnabledStatistics.None)
  .setColumnEncoding('id', pw.Encoding.DELTA_BINARY_PACKED).setColumnEncoding('n32', pw.Encoding.DELTA_BINARY_PACKED)
  .setColumnEncoding('f32', pw.Encoding.BYTE_STREAM_SPLIT).setColumnEncoding('f64', pw.Encoding.BYTE_STREAM_SPLIT)
  .setColumnEncoding('flag', pw.Encoding.RLE).setColumnEncoding('s', pw.Encoding.DELTA_LENGTH_BYTE_ARRAY),
'types, v1 pages, DELTA_BINARY_PACKED (int32/int64), DELTA_LENGTH_BYTE_ARRAY, BYTE_STREAM_SPLIT (float/double), RLE booleans (DELTA_BYTE_ARRAY: the v2 plain files)')

writeArrowRs('gsm8k_like.parquet', arrowTable(gsmRows(40), [['question', str(), true], ['answer', str(), true]]),
  b => b.setCompression(pw.Compression.SNAPPY).setMaxRowGroupSize(16),
  'GSM8K-like question/answer ("#### N"), SNAPPY, v1, dictionary on (as pyarrow writes Hub datasets), 3 row groups')

writeArrowRs('chat_prompt.parquet', arrowTable(chatRows(24), [
  ['prompt', listOf('item', structOf([['role', str()], ['content', str()]], false), false), false],
  ['solution', str(), false], ['level', new arrow.Int64(), false]]),
b => b.setCompression(pw.Compression.ZSTD).setMaxRowGroupSize(10),
'TRL-style conversational prompts: required list<struct<role, content>> (element named "item", as older pyarrow), ZSTD, 3 row groups')

// Nesting beyond chat: struct with a list inside, list of lists, map, required/optional mixes.
const nestedRows = []
for (let i = 0; i < 20; i++) {
  nestedRows.push({
    info: i % 5 === 3 ? null : { a: i % 4 === 0 ? null : i, tags: i % 3 === 0 ? null : Array.from({ length: i % 4 }, (_, k) => `t${i}_${k}`) },
    grid: i % 6 === 1 ? null : Array.from({ length: i % 3 }, (_, k) => k === 1 && i % 2 ? null : Array.from({ length: (i + k) % 3 }, (_, m) => i * 10 + m)),
    scores: Array.from({ length: i % 4 }, (_, k) => (i + k) % 5 === 0 ? null : (i + k) * 0.5),
  })
}
writeArrowRs('nested.parquet', arrowTable(nestedRows, [
  ['info', structOf([['a', new arrow.Int32()], ['tags', listOf('element', str())]], true), true],
  ['grid', listOf('element', listOf('element', new arrow.Int32())), true],
  ['scores', listOf('element', new arrow.Float64(), true), false]]),
b => b.setCompression(pw.Compression.GZIP).setMaxRowGroupSize(8).setWriterVersion(pw.WriterVersion.V2),
'struct<a, list<string>>, list<list<int32>>, required list<double> with null elements; GZIP, v2, 3 row groups')

// Maps: map<string, int32> and map<int32, string> (keys become JSON object keys, as strings).
const mapOf = (k, v) => new arrow.Map_(new arrow.Field('entries', new arrow.Struct([new arrow.Field('key', k, false), new arrow.Field('value', v, true)]), false))
const mapRows = Array.from({ length: 12 }, (_, i) => ({
  attrs: i % 5 === 4 ? null : new Map(Array.from({ length: i % 3 }, (_, k) => [`k${k}`, k === 1 && i % 2 ? null : i * 10 + k])),
  names: new Map(Array.from({ length: (i + 1) % 3 }, (_, k) => [i + k, `name ${i}/${k}`])),
}))
writeArrowRs('map.parquet', arrowTable(mapRows, [['attrs', mapOf(new arrow.Utf8(), new arrow.Int32()), true], ['names', mapOf(new arrow.Int32(), str()), false]]),
  b => b.setCompression(pw.Compression.SNAPPY).setMaxRowGroupSize(5),
  'map<string, int32> (nullable) and map<int32, string>: MAP groups become objects; SNAPPY, v1, 3 row groups')

// hyparquet-writer: data page v2 only, its own dictionary heuristics, auto-detected schema.
writeHyparquet('hyparquet_types.parquet', {
  columnData: [
    { name: 'id', data: types.map(r => r.id), type: 'INT64' },
    { name: 'n32', data: types.map(r => r.n32), type: 'INT32' },
    { name: 'f32', data: types.map(r => r.f32), type: 'FLOAT' },
    { name: 'f64', data: types.map(r => r.f64), type: 'DOUBLE' },
    { name: 'flag', data: types.map(r => r.flag), type: 'BOOLEAN' },
    { name: 's', data: types.map(r => r.s), type: 'STRING' },
    { name: 'seq', data: types.map((r, i) => i * 3), type: 'INT32', nullable: false, encoding: 'DELTA_BINARY_PACKED' },
    { name: 'word', data: types.map((r, i) => words[i % 3]), type: 'STRING', nullable: false, encoding: 'DELTA_BYTE_ARRAY' },
  ],
  rowGroupSize: 15,
  statistics: false,
}, 'flat types, SNAPPY, data page v2, dictionary where it pays, DELTA_* columns, 3 row groups')

writeHyparquet('hyparquet_chat.parquet', {
  columnData: [
    { name: 'messages', data: types.map(r => r.messages) },
    { name: 'answer', data: types.map((r, i) => `#### ${i}`) },
  ],
  schema: [
    { name: 'root', num_children: 2 },
    { name: 'messages', repetition_type: 'OPTIONAL', num_children: 1, converted_type: 'LIST', logical_type: { type: 'LIST' } },
    { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
    { name: 'element', repetition_type: 'OPTIONAL', num_children: 2 },
    { name: 'role', type: 'BYTE_ARRAY', converted_type: 'UTF8', logical_type: { type: 'STRING' }, repetition_type: 'OPTIONAL' },
    { name: 'content', type: 'BYTE_ARRAY', converted_type: 'UTF8', logical_type: { type: 'STRING' }, repetition_type: 'OPTIONAL' },
    { name: 'answer', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' },
  ],
  codec: 'UNCOMPRESSED',
  rowGroupSize: 15,
}, 'chat messages list<struct<role, content>> with null lists, empty lists, null elements and null contents; UNCOMPRESSED, v2, 3 row groups')

const typesFamily = f => f.startsWith('types_') || f === 'dict_fallback.parquet' || f === 'delta_encodings.parquet'
// Logical types and binary: unannotated BYTE_ARRAY with invalid UTF-8, STRING with invalid UTF-8,
// unsigned INT32, DECIMAL, FLOAT16, UUID.
const bin = (...b) => new Uint8Array(b)
writeHyparquet('logical_types.parquet', {
  columnData: [
    { name: 'blob', data: [bin(104, 105), bin(0xff, 0x00, 0x80), bin(), null, bin(0xe2, 0x82, 0xac)] },
    { name: 'text', data: [bin(0x61, 0xff, 0x62), bin(0xe2, 0x82), bin(0xf0, 0x9f, 0x9a, 0x80), bin(0xed, 0xa0, 0x80), null] },
    { name: 'u32', data: [0, 1, 4294967295, 2147483648, 2147483647] },
    { name: 'dec', data: [12345n, -1n, 0n, 99999999n, null] },
    { name: 'half', data: [1.5, -2, 0.0009765625, null, 65504] },
    { name: 'id', data: ['00112233-4455-6677-8899-aabbccddeeff', null, '123e4567-e89b-12d3-a456-426614174000', null, null] },
  ],
  schema: [
    { name: 'root', num_children: 6 },
    { name: 'blob', type: 'BYTE_ARRAY', repetition_type: 'OPTIONAL' },
    { name: 'text', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
    { name: 'u32', type: 'INT32', converted_type: 'UINT_32', repetition_type: 'REQUIRED' },
    { name: 'dec', type: 'INT64', converted_type: 'DECIMAL', scale: 2, precision: 10, repetition_type: 'OPTIONAL' },
    { name: 'half', type: 'FIXED_LEN_BYTE_ARRAY', type_length: 2, logical_type: { type: 'FLOAT16' }, repetition_type: 'OPTIONAL' },
    { name: 'id', type: 'FIXED_LEN_BYTE_ARRAY', type_length: 16, logical_type: { type: 'UUID' }, repetition_type: 'OPTIONAL' },
  ],
  codec: 'UNCOMPRESSED',
}, 'binary without annotation (base64 when not UTF-8), STRING with invalid UTF-8 (U+FFFD), UINT_32, DECIMAL(10,2), FLOAT16, UUID')

for (const [file] of written) await writeExpected(file, typesFamily(file) ? 'types.jsonl' : file.replace(/\.parquet$/, '.jsonl'))
writeFileSync(join(outDir, 'expected.json'), JSON.stringify(manifest, null, 1) + '\n')

// ---- README table -------------------------------------------------------------------------------
const table = written.map(([f, w, d]) => `| ${f} | ${w} | ${d} |`).join('\n')
const readme = readFileSync(join(outDir, 'README.md'), 'utf8')
const begin = '<!-- files:begin -->', end = '<!-- files:end -->'
const updated = readme.slice(0, readme.indexOf(begin) + begin.length) +
  `\n| file | writer | what it covers |\n| --- | --- | --- |\n${table}\n` + readme.slice(readme.indexOf(end))
writeFileSync(join(outDir, 'README.md'), updated)
console.log(`wrote ${written.length} files; expected rows read with hyparquet ${version('hyparquet')}`)
