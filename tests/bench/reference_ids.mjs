// Reference ids from the Hugging Face tokenizers Rust core (npm `tokenizers`, see package.json)
// for GRPO Studio's tokenizer tests.
// usage: node reference_ids.mjs <tokenizer.json> <texts.txt> > reference.jsonl
// One JSON object per line of texts.txt (split on "\n", 1-based "line"):
//   {"line": N, "ids": [...], "ids_with_special": [...], "decoded": "...", "decoded_skip": "..."}
import { readFileSync } from "node:fs";
import { Tokenizer } from "tokenizers";

const [tokenizerPath, textsPath] = process.argv.slice(2);
const tok = Tokenizer.fromFile(tokenizerPath);
const lines = readFileSync(textsPath, "utf8").split("\n");
if (lines.length && lines[lines.length - 1] === "") lines.pop();
for (let i = 0; i < lines.length; ++i) {
  const ids = (await tok.encode(lines[i], null, { addSpecialTokens: false })).getIds();
  const withSpecial = (await tok.encode(lines[i], null, { addSpecialTokens: true })).getIds();
  const decoded = await tok.decode(withSpecial, false);
  const decodedSkip = await tok.decode(withSpecial, true);
  process.stdout.write(JSON.stringify({ line: i + 1, ids, ids_with_special: withSpecial,
                                        decoded, decoded_skip: decodedSkip }) + "\n");
}
