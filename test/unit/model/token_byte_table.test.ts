// The byte table decodes as the tokenizer does, and stands aside where it cannot.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { readText } from "../../../lib/runtime/files.ts";
import { ModelTokenizer } from "../../../lib/model/tokenizer.ts";
import { TokenByteTable } from "../../../lib/model/token_byte_table.ts";
import { rng } from "../../helpers/bf16.ts";
import { tinyModelDir, tinyTokenizer } from "../../helpers/tiny_model_dir.ts";

const tok = await tinyTokenizer();
const dir = await tinyModelDir();
const json = JSON.parse(readText(join(dir, "tokenizer.json"))) as Record<string, unknown>;
const config = JSON.parse(readText(join(dir, "tokenizer_config.json"))) as Record<string, unknown>;
const reference = (ids: number[], o: { skipSpecialTokens: boolean }) => tok.decode(ids, o);

test("a byte-level tokenizer's table decodes random sequences exactly as the tokenizer", () => {
  const table = tok.tokenBytes!;
  expect(table).not.toBeNull();
  const r = rng(7);
  for (let trial = 0; trial < 300; trial++) {
    const ids = Array.from({ length: 1 + Math.floor(r() * 24) }, () => {
      const u = r();
      if (u < 0.1) return 151643 + Math.floor(r() * 26); // added tokens, special and not
      if (u < 0.12) return 151669 + Math.floor(r() * 300); // past the tokenizer's ids
      return Math.floor(r() * 151643);
    });
    for (const skip of [false, true]) {
      expect(table.decode(ids, skip)).toBe(tok.decode(ids, { skipSpecialTokens: skip }));
    }
  }
  const text = "<|im_start|>user\nnaïve 日本 🇯🇵 👩‍🔬<|im_end|>";
  expect(table.decode(tok.encode(text), false)).toBe(text);
});

test("a tokenizer that cleans up spaces, or is not byte-level, has no table", () => {
  const { clean_up_tokenization_spaces: _, ...unset } = config;
  expect(TokenByteTable.build(json, unset, reference)).toBeNull();
  expect(TokenByteTable.build(json, { ...config, clean_up_tokenization_spaces: true }, reference)).toBeNull();
  expect(TokenByteTable.build({ ...json, decoder: { type: "Metaspace" } }, config, reference)).toBeNull();
  const model = json.model as Record<string, unknown>;
  expect(TokenByteTable.build({ ...json, model: { ...model, type: "WordPiece" } }, config, reference)).toBeNull();
  expect(TokenByteTable.build(json, config, reference)).not.toBeNull();
});

test("a table the tokenizer's own decode disagrees with is left out", () => {
  expect(TokenByteTable.build(json, config, (ids, o) => reference(ids, o).toUpperCase())).toBeNull();
  const noCleanup = new ModelTokenizer(json, { ...config, clean_up_tokenization_spaces: undefined });
  expect(noCleanup.tokenBytes).toBeNull();
});
