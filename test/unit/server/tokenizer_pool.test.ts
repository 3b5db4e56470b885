// The tokenizer pool on real threads with the real Qwen3 tokenizer of the tiny test model: results
// equal the inline tokenizer's, its bounds (queue, per-job time) hold, and a 3 MB prompt through
// the app never blocks the main thread.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ModelTokenizer } from "../../../lib/model/tokenizer.ts";
import { maxInputCharsPerToken, NORMALIZATION_CONTRACTION } from "../../../lib/model/token_lengths.ts";
import { createApp } from "../../../lib/server/app.ts";
import { ApiError } from "../../../lib/server/errors.ts";
import { INLINE_LIMIT_CHARS, pooledPromptTokenizer } from "../../../lib/server/prompt_tokenizer.ts";
import { TokenizerPool } from "../../../lib/server/tokenizer_pool.ts";
import { tinyModelDir, tinyTokenizer } from "../../helpers/tiny_model_dir.ts";
import { FakeEngine } from "./fake_engine.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

let dir: string;
let inline: ModelTokenizer;
let pool: TokenizerPool;

beforeAll(async () => {
  dir = await tinyModelDir();
  inline = await tinyTokenizer();
  pool = await TokenizerPool.start({ dir, threads: 2 });
}, 120_000);
afterAll(() => pool?.close());

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(() => undefined, (e: unknown) => e);
}

describe("per-token character bound", () => {
  test("Qwen3: its longest token times the NFC contraction; deleting tokenizers have none", () => {
    const json = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"));
    const longest = Math.max(...Object.keys(json.model.vocab).map((k) => k.length));
    expect(maxInputCharsPerToken(json)).toBe(longest * NORMALIZATION_CONTRACTION);
    expect(pool.maxInputCharsPerToken).toBe(longest * NORMALIZATION_CONTRACTION);
    expect(maxInputCharsPerToken({ ...json, normalizer: { type: "Strip" } })).toBe(Infinity);
    expect(maxInputCharsPerToken({ ...json, pre_tokenizer: { type: "WhitespaceSplit" } })).toBe(Infinity);
    expect(maxInputCharsPerToken({ ...json, added_tokens: [{ content: "<m>", lstrip: true }] })).toBe(Infinity);
    expect(maxInputCharsPerToken({ model: { type: "WordPiece", vocab: { a: 1 } } })).toBe(Infinity);
    expect(maxInputCharsPerToken({ model: { type: "BPE", vocab: { abc: 0 } }, normalizer: null, pre_tokenizer: null }))
      .toBe(3);
  });
});

describe("tokenizer pool", () => {
  test("encode, chat template and decode equal the inline tokenizer's", async () => {
    const tok = pooledPromptTokenizer(inline, pool);
    const text = "The quick brown fox jumps over the lazy dog. ".repeat(400);
    expect(text.length).toBeGreaterThan(INLINE_LIMIT_CHARS);
    const ids = await tok.encode(text, { addSpecialTokens: true });
    expect(ids).toEqual(inline.encode(text));
    const messages = [{ role: "system" as const, content: "Be brief." }, { role: "user" as const, content: text }];
    const chat = await tok.encodeChat(messages, { addGenerationPrompt: true, addSpecialTokens: false });
    expect(chat).toEqual(
      inline.encode(inline.applyChatTemplate(messages, { addGenerationPrompt: true }), { addSpecialTokens: false }),
    );
    const many = ids.concat(ids);
    expect(await tok.decode(many)).toBe(inline.decode(many));
  });

  test("a template that refuses the messages is a 400 on messages, on a thread and inline", async () => {
    const strict = mkdtempSync(join(tmpdir(), "lmpool-template-"));
    for (const f of ["tokenizer.json", "tokenizer_config.json"]) copyFileSync(join(dir, f), join(strict, f));
    writeFileSync(
      join(strict, "chat_template.jinja"),
      "{% if messages[0].role != 'user' %}{{ raise_exception('the first message must be the user') }}{% endif %}{{ messages[0].content }}",
    );
    const strictPool = await TokenizerPool.start({ dir: strict, threads: 1 });
    try {
      const tok = pooledPromptTokenizer(ModelTokenizer.fromDir(strict), strictPool);
      for (const content of ["x".repeat(INLINE_LIMIT_CHARS), "short"]) {
        const err = await rejection(
          tok.encodeChat([{ role: "assistant", content }], { addGenerationPrompt: true, addSpecialTokens: false }),
        );
        expect(err).toBeInstanceOf(ApiError);
        expect((err as ApiError).status).toBe(400);
        expect((err as ApiError).param).toBe("messages");
        expect((err as ApiError).message).toContain("the first message must be the user");
      }
      expect(
        await tok.encodeChat([{ role: "user", content: "x".repeat(INLINE_LIMIT_CHARS) }], {
          addGenerationPrompt: true,
          addSpecialTokens: false,
        }),
      ).toEqual(
        inline.encode("x".repeat(INLINE_LIMIT_CHARS), { addSpecialTokens: false }),
      );
    } finally {
      strictPool.close();
      rmSync(strict, { recursive: true, force: true });
    }
  }, 60_000);

  test("a full queue is a 503 at once; the queued jobs still complete", async () => {
    const small = await TokenizerPool.start({ dir, threads: 1, maxQueue: 1 });
    try {
      const text = "lorem ipsum dolor sit amet ".repeat(20_000);
      const running = small.run({ op: "encode", text, addSpecialTokens: true });
      const queued = small.run({ op: "encode", text: "queued", addSpecialTokens: true });
      const refused = await rejection(small.run({ op: "encode", text: "one too many", addSpecialTokens: true }));
      expect(refused).toBeInstanceOf(ApiError);
      expect((refused as ApiError).status).toBe(503);
      expect((refused as ApiError).type).toBe("TokenizerBusyError");
      expect((await running).type).toBe("done");
      const q = await queued;
      expect(q.type === "done" && Array.from(q.ids ?? [])).toEqual(inline.encode("queued"));
    } finally {
      small.close();
    }
  }, 60_000);

  test("a job past its time limit fails with 503 and the thread is replaced", async () => {
    const slow = await TokenizerPool.start({ dir, threads: 1, jobTimeoutMs: 50, log: () => {} });
    try {
      const err = await rejection(
        slow.run({ op: "encode", text: "lorem ipsum dolor sit amet ".repeat(100_000), addSpecialTokens: true }),
      );
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).type).toBe("TokenizerTimeoutError");
      // The replacement thread loads the tokenizer, then serves again.
      const after = await slow.run({ op: "encode", text: "hello", addSpecialTokens: true });
      expect(after.type === "done" && Array.from(after.ids ?? [])).toEqual(inline.encode("hello"));
    } finally {
      slow.close();
    }
  }, 60_000);

  test("a queued job whose request went away leaves the queue without running", async () => {
    const one = await TokenizerPool.start({ dir, threads: 1 });
    try {
      const busy = one.run({ op: "encode", text: "lorem ipsum ".repeat(50_000), addSpecialTokens: true });
      const gone = new AbortController();
      const queued = rejection(one.run({ op: "encode", text: "never", addSpecialTokens: true }, gone.signal));
      expect(one.queued).toBe(1);
      gone.abort(new Error("client left"));
      expect(((await queued) as Error).message).toBe("client left");
      expect(one.queued).toBe(0);
      await busy;
    } finally {
      one.close();
    }
  }, 60_000);

  test("a model directory without a tokenizer fails start-up with its path", async () => {
    const err = await rejection(TokenizerPool.start({ dir: "/nonexistent-model-dir", threads: 1 }));
    expect((err as Error).message).toContain("/nonexistent-model-dir");
  });
});

describe("a 3 MB prompt through the app", () => {
  test("is tokenized off the main thread: no main-thread stall over 200 ms", async () => {
    const engine = new FakeEngine();
    // A context long enough that the character bound lets 3 MB through to the tokenizer.
    (engine as { model: FakeEngine["model"] }).model = { ...engine.model, maxModelLen: 1_000_000, vocabSize: 200_000 };
    const app = createApp({ engine, tokenizer: pooledPromptTokenizer(inline, pool), maxRequestBytes: 8 * 1024 * 1024 });
    const prompt = "hello world, this is a test. ".repeat(110_000);
    expect(prompt.length).toBeGreaterThan(3_000_000);
    // The client shares this thread: its bodies are built before the clock runs, and the clock
    // stops while it reads a reply, so what is timed is the server's share of the thread.
    const tokenizeBody = JSON.stringify({ prompt });
    const chatBody = JSON.stringify({ messages: [{ role: "user", content: prompt }], max_tokens: 1 });
    let worstGapMs = 0;
    let last = performance.now();
    let clientBusy = false;
    const timer = setInterval(() => {
      const now = performance.now();
      if (!clientBusy) worstGapMs = Math.max(worstGapMs, now - last);
      last = now;
    }, 10);
    const asClient = async <T>(work: () => Promise<T>): Promise<T> => {
      clientBusy = true;
      try {
        return await work();
      } finally {
        last = performance.now();
        clientBusy = false;
      }
    };
    try {
      const res = await app.fetch(new Request("http://x/tokenize", { method: "POST", body: tokenizeBody }));
      expect(res.status).toBe(200);
      const body: Json = await asClient(() => res.json());
      expect(body.count).toBeGreaterThan(500_000);
      const chat = await app.fetch(new Request("http://x/v1/chat/completions", { method: "POST", body: chatBody }));
      expect(chat.status).toBe(200);
      expect(engine.requests.at(-1)!.promptTokenIds.length).toBeGreaterThan(500_000);
    } finally {
      clearInterval(timer);
    }
    expect(worstGapMs).toBeLessThan(200);
  }, 120_000);
});
