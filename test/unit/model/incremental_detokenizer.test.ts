// Streaming detokenization equals the full decode, and never emits half a character: through the
// tokenizer's window decode, and through its byte table.
import { expect, test } from "bun:test";
import { IncrementalDetokenizer } from "../../../lib/model/incremental_detokenizer.ts";
import type { TokenByteTable } from "../../../lib/model/token_byte_table.ts";
import { rng } from "../../helpers/bf16.ts";
import { tinyTokenizer } from "../../helpers/tiny_model_dir.ts";

const tok = await tinyTokenizer();
const PATHS = [["window", null], ["byte table", tok.tokenBytes]] as const;

test("the tokenizer has a byte table (its decode is byte-level)", () => {
  expect(tok.tokenBytes).not.toBeNull();
});

function stream(
  ids: readonly number[],
  skipSpecialTokens = false,
  bytes: TokenByteTable | null = null,
): { deltas: string[]; text: string } {
  const d = new IncrementalDetokenizer(tok, { skipSpecialTokens, bytes });
  const deltas = ids.map((id) => d.push(id));
  deltas.push(d.flush());
  expect(d.text).toBe(deltas.join(""));
  return { deltas, text: deltas.join("") };
}

// Emoji and rare CJK split into byte-level tokens that are not whole characters on their own.
const MULTIBYTE = "🎉🦀🧪👩‍🔬 𝄞 鱻龘 ꙮ 𓀀 ŉ Ǆ ﷺ";
const multibytePool = [...new Set(tok.encode(MULTIBYTE))];

test("the multi-byte pool really holds partial characters", () => {
  expect(multibytePool.some((id) => tok.decode([id]).includes("\uFFFD"))).toBe(true);
});

test.each(PATHS)("%s: streaming valid text emits each character whole, as soon as it is complete", (_, bytes) => {
  const texts = [MULTIBYTE, "Hello 世界! 🎉 done", "<|im_start|>assistant\n🎉🎉<|im_end|>", "naïve 日本 🇯🇵 end"];
  for (const text of texts) {
    const ids = tok.encode(text);
    const { deltas } = stream(ids, false, bytes);
    expect(deltas.join("")).toBe(text);
    expect(deltas.some((d) => d.includes("\uFFFD"))).toBe(false);
    expect(deltas.at(-1)).toBe(""); // nothing left for flush: the last character completed
    // Every emitted prefix is a prefix of the text: no lone surrogates or replacement glyphs.
    let emitted = "";
    for (const d of deltas) {
      emitted += d;
      expect(text.startsWith(emitted)).toBe(true);
    }
  }
});

test.each(PATHS)("%s: random token streams (partial bytes, specials, unknown ids) concatenate to the full decode", (
  _,
  bytes,
) => {
  const r = rng(2024);
  for (let trial = 0; trial < 150; trial++) {
    const n = 1 + Math.floor(r() * 40);
    const ids = Array.from({ length: n }, () => {
      const u = r();
      if (u < 0.5) return multibytePool[Math.floor(r() * multibytePool.length)]!;
      if (u < 0.6) return 151643 + Math.floor(r() * 30); // specials and <think> tags
      if (u < 0.62) return 151669 + Math.floor(r() * 267); // padded, unknown to the tokenizer
      return Math.floor(r() * 151643);
    });
    const skip = trial % 3 === 0;
    const { text } = stream(ids, skip, bytes);
    expect(text).toBe(tok.decode(ids, { skipSpecialTokens: skip }));
  }
});

test.each(PATHS)("%s: context ids give the first window context without being emitted", (_, bytes) => {
  const prompt = tok.encode("Say hi:");
  const out = tok.encode(" 🎉 hi");
  const d = new IncrementalDetokenizer(tok, { contextIds: prompt.slice(-3), bytes });
  const text = out.map((id) => d.push(id)).join("") + d.flush();
  expect(text).toBe(" 🎉 hi");
  expect(d.pushMany([])).toBe("");
});

test.each(PATHS)("%s: a prompt ending inside a character leaves no trace in the output", (_, bytes) => {
  const partial = multibytePool.find((id) => tok.decode([id]).includes("\uFFFD"))!;
  const d = new IncrementalDetokenizer(tok, { contextIds: [partial], bytes });
  const text = tok.encode("hi 🎉").map((id) => d.push(id)).join("") + d.flush();
  expect(text).toBe("hi 🎉");
});
