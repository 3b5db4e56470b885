// The Qwen3 tokenizer of the synthetic model: unicode round trips, special tokens, EOS ids, and
// the chat template rendering Qwen3's format.
import { expect, test } from "bun:test";
import { ModelFormatError } from "../../../lib/core/errors.ts";
import { ModelTokenizer } from "../../../lib/model/tokenizer.ts";
import { rng } from "../../helpers/bf16.ts";
import { tinyTokenizer } from "../../helpers/tiny_model_dir.ts";

const tok = await tinyTokenizer();

test("encode/decode round-trips unicode text", () => {
  const texts = [
    "Hello, world!",
    "Grüße aus Köln — naïve café",
    "你好，世界。日本語のテキスト",
    "emoji 🎉👩‍👩‍👧 flags 🇯🇵 and math ∮ E⋅da = Q",
    "  leading spaces\n\ttabs\r\nand newlines  ",
    "",
  ];
  for (const t of texts) expect(tok.decode(tok.encode(t))).toBe(t);
  const r = rng(11);
  for (let i = 0; i < 30; i++) {
    const t = String.fromCodePoint(
      ...Array.from({ length: 20 }, () => [0x20 + Math.floor(r() * 95), 0xe9, 0x4e2d, 0x1f600][Math.floor(r() * 4)]!),
    );
    expect(tok.decode(tok.encode(t))).toBe(t);
  }
  expect(tok.encode("Hello")).toEqual([9707]);
});

test("special tokens are recognized in text and can be skipped when decoding", () => {
  const ids = tok.encode("<|im_start|>user\nhi<|im_end|>");
  expect(ids[0]).toBe(151644);
  expect(ids.at(-1)).toBe(151645);
  expect(tok.decode(ids, { skipSpecialTokens: true })).toBe("user\nhi");
  expect(tok.tokenToId("<|im_end|>")).toBe(151645);
  expect(tok.eosTokenIds).toEqual([151645, 151643]);
  // Ids past the tokenizer's 151669 tokens (the embedding is padded to 151936) decode to nothing.
  expect(tok.decode([9707, 151900])).toBe("Hello");
  expect(tok.decode([])).toBe("");
});

test("the chat template renders Qwen3's format", () => {
  const prompt = tok.applyChatTemplate([{ role: "user", content: "What is 2+2?" }], { addGenerationPrompt: true });
  expect(prompt).toBe("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
  const convo = tok.applyChatTemplate([
    { role: "system", content: "Be brief." },
    { role: "user", content: "Hi" },
    { role: "assistant", content: "Hello!" },
    { role: "user", content: "Bye" },
  ]);
  expect(convo).toBe(
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n" +
      "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n",
  );
  const noThink = tok.applyChatTemplate([{ role: "user", content: "x" }], {
    addGenerationPrompt: true,
    variables: { enable_thinking: false },
  });
  expect(noThink.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n")).toBe(true);
  // The rendered prompt tokenizes with the special tokens as single ids.
  expect(tok.encode(prompt).filter((id) => id === 151644).length).toBe(2);
});

test("templates see bos/eos tokens; a model without a template says so", () => {
  const tokenizerJson = {
    normalizer: null,
    pre_tokenizer: null,
    post_processor: null,
    decoder: null,
    added_tokens: [],
    model: { type: "WordLevel", vocab: { a: 0, "</s>": 1, "<s>": 2 }, unk_token: "a" },
  };
  const t = new ModelTokenizer(tokenizerJson, {
    bos_token: { content: "<s>" },
    eos_token: "</s>",
    chat_template: "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}",
  });
  expect(t.applyChatTemplate([{ role: "user", content: "q" }])).toBe("<s>q</s>");
  expect(t.eosTokenIds).toEqual([1]);
  const none = new ModelTokenizer(tokenizerJson, {}, { source: "/models/x" });
  expect(none.hasChatTemplate).toBe(false);
  expect(() => none.applyChatTemplate([])).toThrow(ModelFormatError);
  expect(() => none.applyChatTemplate([])).toThrow(/\/models\/x: the model has no chat template/);
  expect(() => new ModelTokenizer(tokenizerJson, { chat_template: "{% for %}" })).toThrow(
    /chat template does not parse/,
  );
});
