// Renders every template of templates.json with every conversation of conversations.json through
// Hugging Face's @huggingface/jinja (the reference renderer, npm, version in package.json) and
// writes golden.json, which tests/text/test_chat_golden.cpp compares byte for byte:
//   npm install && node make_chat_golden.mjs        (run from this folder)
// The variables follow transformers' apply_chat_template: the template's special tokens, then
// messages, tools (null unless given), documents (null), add_generation_prompt, then kwargs.
// An error is marked raised_by_template when its message is the template's raise_exception
// text (we must raise with the same message); other errors are the renderer's own (we must
// raise too; the wording is Python's here, JavaScript's there).
import { readFileSync, writeFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const version = JSON.parse(readFileSync("node_modules/@huggingface/jinja/package.json", "utf8")).version;
const templates = JSON.parse(readFileSync("templates.json", "utf8"));
const conversations = JSON.parse(readFileSync("conversations.json", "utf8"));

const cases = [];
for (const [name, t] of Object.entries(templates)) {
  const source = readFileSync(t.file, "utf8");
  const template = new Template(source);
  for (const c of conversations) {
    const context = {
      ...t.variables,
      messages: c.messages,
      tools: null,
      documents: null,
      add_generation_prompt: c.add_generation_prompt,
      ...(c.kwargs ?? {}),
    };
    const entry = { template: name, conversation: c.id };
    try {
      entry.output = template.render(context);
    } catch (e) {
      entry.error = e.message;
      // raise_exception(message) in the template, or an error of the renderer itself
      entry.raised_by_template = source.includes(e.message);
    }
    cases.push(entry);
  }
}
const out = { generator: `@huggingface/jinja ${version} via make_chat_golden.mjs`, cases };
writeFileSync("golden.json", JSON.stringify(out, null, 1) + "\n");
console.log(`${cases.length} cases (${cases.filter((c) => c.error).length} raise)`);
